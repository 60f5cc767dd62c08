package index

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/store"
)

// SegmentObject writes one segment object from entries that arrive in
// ascending ID order (a merge, an external sort), so that writing a
// segment of any size holds no entries in memory: only what every loaded
// segment holds anyway, its block table and bloom filter.
type SegmentObject struct {
	st  store.Store
	key *crypto.Key
	sid id.ID
	obj store.ObjectWriter
	cw  *countingWriter
	sw  *SegmentWriter
}

// CreateSegment starts a new segment object; expected sizes its bloom
// filter (an upper bound is fine) and supersedes lists the segments it
// replaces. Nothing is visible until Commit.
func CreateSegment(ctx context.Context, st store.Store, key *crypto.Key, expected int, supersedes []id.ID) (*SegmentObject, error) {
	sid := id.Random()
	obj, err := st.Create(ctx, ObjectName(sid), store.PutOptions{IfNotExists: st.Properties().ConditionalWrites})
	if err != nil {
		return nil, err
	}
	cw := &countingWriter{w: obj}
	sw, err := NewSegmentWriter(cw, key, expected, supersedes)
	if err != nil {
		_ = obj.Abort()
		return nil, err
	}
	return &SegmentObject{st: st, key: key, sid: sid, obj: obj, cw: cw, sw: sw}, nil
}

// Add appends one entry (IDs strictly ascending).
func (s *SegmentObject) Add(e Entry) error { return s.sw.Add(e) }

// Count is the number of entries added.
func (s *SegmentObject) Count() uint64 { return s.sw.Count() }

// Commit finishes the segment, makes it visible and returns it loaded.
func (s *SegmentObject) Commit(ctx context.Context) (*Segment, error) {
	if err := s.sw.Finish(); err != nil {
		_ = s.obj.Abort()
		return nil, err
	}
	if _, err := s.obj.Commit(); err != nil {
		return nil, fmt.Errorf("commit index segment: %w", err)
	}
	return OpenSegment(ctx, s.st, s.key, s.sid, s.cw.n)
}

// Abort discards the segment.
func (s *SegmentObject) Abort() { _ = s.obj.Abort() }

// Scan calls fn with every entry of the segment in ID order, reading one
// block at a time into buffers it reuses: a pass over a segment of any
// size holds one block and makes no garbage per block. An error from fn
// stops it and is returned.
func (s *Segment) Scan(ctx context.Context, st store.Store, key *crypto.Key, fn func(Entry) error) error {
	name := ObjectName(s.ID)
	buf := scanPool.Get().(*scanBuffers)
	defer scanPool.Put(buf)
	sealed, plain := buf.sealed, buf.plain
	defer func() { buf.sealed, buf.plain = sealed, plain }()
	for i, row := range s.f.rows {
		if err := ctx.Err(); err != nil {
			return err
		}
		if cap(sealed) < int(row.length) {
			sealed = make([]byte, row.length)
		}
		sealed = sealed[:row.length]
		if err := readFull(ctx, st, name, row.offset, sealed); err != nil {
			return fmt.Errorf("index segment %s block %d: %w", s.ID.Short(), i, err)
		}
		var err error
		if plain, err = key.Open(plain[:0], sealed, blockSeal); err != nil {
			return fmt.Errorf("index segment %s block %d: %w: block: %w", s.ID.Short(), i, ErrFormat, err)
		}
		if err := blockEntries(plain, row, fn); err != nil {
			if errors.Is(err, ErrFormat) {
				return fmt.Errorf("index segment %s block %d: %w", s.ID.Short(), i, err)
			}
			return err
		}
	}
	return nil
}

// scanBuffers are the buffers of one Scan, shared through scanPool so that
// a pass over many segments allocates them once.
type scanBuffers struct{ sealed, plain []byte }

var scanPool = sync.Pool{New: func() any { return &scanBuffers{} }}

func readFull(ctx context.Context, st store.Store, name string, off int64, dst []byte) error {
	rc, err := st.Read(ctx, name, off, int64(len(dst)))
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = io.ReadFull(rc, dst)
	return err
}
