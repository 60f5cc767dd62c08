package replica

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
)

// applied is what writing one disk's changes moved.
type applied struct {
	read, written, zeroed int64
	spans                 int
}

// applyDisk writes into the overlay behind w the spans of newMap that
// differ from old (the disk map the overlay's backing chain equals; nil
// when there is none to compare with, and every span is written). Only
// the changed spans' chunks are read from the repository, each distinct
// chunk once. backed says the overlay has a backing file: a span that
// turned to zeros must then be written as zeros; without one it already
// reads as zeros.
func applyDisk(ctx context.Context, r *repo.Repository, w *overlayWriter, newMap *repo.DiskMap, old []id.ID, backed bool, hook func(string)) (applied, error) {
	var res applied
	cur, err := newMap.All(ctx)
	if err != nil {
		return res, err
	}
	changed := func(i uint64) bool { return old == nil || i >= uint64(len(old)) || old[i] != cur[i] }
	cs := int64(newMap.ChunkSize())
	var zeroFrom, zeroLen int64
	flushZeros := func() error {
		if zeroLen == 0 {
			return nil
		}
		err := w.WriteZeroes(ctx, zeroFrom, zeroLen)
		res.zeroed += zeroLen
		zeroLen = 0
		return err
	}
	for i, x := range cur {
		if x == repo.LostChunk {
			return res, fmt.Errorf("span %d of the point was lost (a repair recorded it): a replica of it would not equal the source", i)
		}
		if !x.IsZero() || !backed || !changed(uint64(i)) {
			if err := flushZeros(); err != nil {
				return res, err
			}
			continue
		}
		off := int64(i) * cs
		if zeroLen == 0 {
			zeroFrom = off
		}
		zeroLen += int64(newMap.SpanLength(uint64(i)))
		res.spans++
	}
	if err := flushZeros(); err != nil {
		return res, err
	}
	var read, written, spans atomic.Int64
	err = restore.Chunks(ctx, r, newMap, 0, func(i uint64) bool { return !changed(i) },
		func(_ id.ID, at []uint64, plain []byte) error {
			read.Add(int64(len(plain)))
			for _, i := range at {
				if _, err := w.WriteAtContext(ctx, plain[:newMap.SpanLength(i)], int64(i)*cs, false); err != nil {
					return fmt.Errorf("write span %d: %w", i, err)
				}
				written.Add(int64(newMap.SpanLength(i)))
				if spans.Add(1) == 1 {
					hook("span-written")
				}
			}
			return nil
		})
	res.read, res.written, res.spans = read.Load(), written.Load(), res.spans+int(spans.Load())
	return res, err
}
