package gc

import (
	"context"

	"github.com/coffer-backup/coffer/internal/extsort"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/index"
)

// sortIndex sorts the entries of segs by chunk ID (index records). It
// reads one segment after the other, one block at a time
// (index.ScanSegments): a k-way merge of the segments (index.Merge) would
// hold a decoded block of every segment at once, and segments pile up
// between two collections (one or more per backup session).
// Entries of one chunk in several segments come out next to each other.
func sortIndex(ctx context.Context, r *repo.Repository, segs []*index.Segment, o Options) (*extsort.Cursor, error) {
	s := extsort.New(index.RecordSize, o.MemoryBudget, o.TempDir)
	var rec [index.RecordSize]byte
	err := index.ScanSegments(ctx, r.Store(), r.Key(), segs, func(e index.Entry) error {
		index.PutRecord(rec[:], e)
		return s.Add(rec[:])
	}, nil)
	if err != nil {
		s.Close()
		return nil, err
	}
	return s.Cursor(false)
}
