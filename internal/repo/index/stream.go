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
	return s.scan(ctx, st, key, fn, nil)
}

// ScanSegments calls fn with every entry of segs, one segment after the
// other (in ID order within a segment, not across segments), holding one
// block at a time. A block that cannot be read (damaged, cut off) is
// reported to damaged and skipped; with damaged nil it stops the scan.
//
// Unlike Merge, which holds a decoded block of every segment at once, its
// memory does not grow with the number or the size of the segments: it is
// for passes that sort the entries anyway (by pack, or externally by ID).
func ScanSegments(ctx context.Context, st store.Store, key *crypto.Key, segs []*Segment, fn func(Entry) error, damaged func(seg id.ID, block int, err error)) error {
	for _, seg := range segs {
		if err := seg.scan(ctx, st, key, fn, damaged); err != nil {
			return err
		}
	}
	return nil
}

func (s *Segment) scan(ctx context.Context, st store.Store, key *crypto.Key, fn func(Entry) error, damaged func(seg id.ID, block int, err error)) error {
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
		err := readFull(ctx, st, name, row.offset, sealed)
		if err == nil {
			if plain, err = key.Open(plain[:0], sealed, blockSeal); err != nil {
				err = fmt.Errorf("%w: block: %w", ErrFormat, err)
			}
		}
		if err == nil {
			// Entries are checked before any is passed on, so that a
			// damaged block is skipped whole, as Merge skips it.
			err = blockEntries(plain, row, func(Entry) error { return nil })
		}
		if err != nil {
			if damaged != nil && (errors.Is(err, ErrFormat) || errors.Is(err, store.ErrInvalidRange)) {
				damaged(s.ID, i, fmt.Errorf("index segment %s block %d: %w", s.ID.Short(), i, err))
				continue
			}
			return fmt.Errorf("index segment %s block %d: %w", s.ID.Short(), i, err)
		}
		if err := blockEntries(plain, row, fn); err != nil {
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
