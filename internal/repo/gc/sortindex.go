package gc

import (
	"context"
	"encoding/binary"

	"github.com/coffer-backup/coffer/internal/extsort"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/index"
)

// An index record is an index entry keyed by chunk ID, for writing a
// segment: chunk ID [32], pack ID [16], offset, length, raw length (u32).
const indexRecSize = 60

func putIndexRec(b []byte, e index.Entry) {
	copy(b[:32], e.ID[:])
	copy(b[32:48], e.Pack[:])
	binary.BigEndian.PutUint32(b[48:], e.Offset)
	binary.BigEndian.PutUint32(b[52:], e.Length)
	binary.BigEndian.PutUint32(b[56:], e.RawLength)
}

func getIndexRec(b []byte) index.Entry {
	var e index.Entry
	copy(e.ID[:], b[:32])
	copy(e.Pack[:], b[32:48])
	e.Offset = binary.BigEndian.Uint32(b[48:])
	e.Length = binary.BigEndian.Uint32(b[52:])
	e.RawLength = binary.BigEndian.Uint32(b[56:])
	return e
}

// sortIndex sorts the entries of segs by chunk ID. It reads one segment
// after the other, one block at a time: a k-way merge of the segments
// (index.Merge) would hold a decoded block of every segment at once, and
// segments pile up between two collections (one or more per backup
// session).
// Entries of one chunk in several segments come out next to each other.
func sortIndex(ctx context.Context, r *repo.Repository, segs []*index.Segment, o Options) (*extsort.Cursor, error) {
	s := extsort.New(indexRecSize, o.MemoryBudget, o.TempDir)
	var rec [indexRecSize]byte
	for _, seg := range segs {
		err := seg.Scan(ctx, r.Store(), r.Key(), func(e index.Entry) error {
			putIndexRec(rec[:], e)
			return s.Add(rec[:])
		})
		if err != nil {
			s.Close()
			return nil, err
		}
	}
	return s.Cursor(false)
}
