package restore

import (
	"context"
	"fmt"
	"sync"

	"github.com/coffer-backup/coffer/internal/directio"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/procs"
	"github.com/coffer-backup/coffer/internal/repo"
)

// maxBatchBytes bounds the plaintext of one batch: large enough that one
// write carries several chunks (a 1 MiB O_DIRECT write costs nearly as much
// per request as a 4 MiB one on the disks measured), small enough that the
// workers' batch buffers stay a few MiB each. 2 MiB, with 4 MiB reads
// (maxGroupBytes), restored the 4 GiB benchmark image as fast as 4 and
// 8 MiB did, and kept the workers' buffers (4 x 6 MiB on 2 CPUs) within
// the 32 MiB the key derivation had already made resident: peak RSS 77
// MiB instead of 98 (docs/benchmarks.md, session of 2026-12-06, issue 42).
const maxBatchBytes = 2 << 20

// fetch reads the planned groups with parallel workers (one request per
// group), verifies and decodes every chunk, and calls fn from several
// goroutines at once with batches: runs of chunks of one group that fill
// consecutive spans, decoded back to back into one buffer, so a caller can
// write a batch with one request. A chunk that fills several spans is a
// batch of its own. The plaintext is only valid during the call.
func fetch(ctx context.Context, r *repo.Repository, groups []readGroup, workers int, fn func(batch []*chunkRef, plain []byte) error) error {
	if workers <= 0 {
		// Each worker holds ~6 MiB of buffers: bounded, whatever the
		// number of CPUs (the binary runs two Go Ps per CPU).
		workers = max(min(procs.Working(), 16), r.Store().Properties().Connections)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan *readGroup)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	fail := func(err error) { errOnce.Do(func() { firstErr = err; cancel() }) }
	maxRaw := maxRawLength(groups)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dec, err := r.NewDecoder()
			if err != nil {
				fail(err)
				return
			}
			// Aligned so restores can write it with O_DIRECT.
			plain := directio.AlignedBuffer(max(maxBatchBytes, maxRaw))
			var buf []byte
			for g := range jobs {
				// Reused buffers keep memory at workers x (4 MiB read + 2 MiB batch).
				if int64(cap(buf)) < g.length {
					buf = make([]byte, g.length, max(g.length, maxGroupBytes))
				}
				buf = buf[:g.length]
				if err := r.ReadPackRange(ctx, g.pack, g.offset, buf); err != nil {
					fail(err)
					return
				}
				if err := decodeBatches(dec, g, buf, plain, fn); err != nil {
					fail(err)
					return
				}
			}
		}()
	}
	for i := range groups {
		select {
		case jobs <- &groups[i]:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// decodeBatches decodes the chunks of group g (read into buf) into plain,
// calling fn for every batch.
func decodeBatches(dec *repo.Decoder, g *readGroup, buf, plain []byte, fn func([]*chunkRef, []byte) error) error {
	start := 0 // first ref of the current batch
	plain = plain[:0]
	flush := func(end int) error {
		if end == start {
			return nil
		}
		err := fn(g.refs[start:end], plain)
		start, plain = end, plain[:0]
		return err
	}
	for i, ref := range g.refs {
		raw := int(ref.loc.RawLength)
		if i > start && !(extends(g.refs[i-1], ref) && len(plain)+raw <= cap(plain)) {
			if err := flush(i); err != nil {
				return err
			}
		}
		off := int64(ref.loc.Offset) - g.offset
		var err error
		plain, err = dec.Decode(plain, buf[off:off+int64(ref.loc.Length)], ref.id, raw)
		if err != nil {
			return fmt.Errorf("span %d: %w", ref.spans[0], err)
		}
		if len(ref.spans) > 1 {
			if err := flush(i + 1); err != nil {
				return err
			}
		}
	}
	return flush(len(g.refs))
}

// extends reports whether next's plaintext continues prev's on the disk:
// both fill one span each and next's span follows prev's (so prev is not
// the disk's last, possibly short, span).
func extends(prev, next *chunkRef) bool {
	return len(prev.spans) == 1 && len(next.spans) == 1 && next.spans[0] == prev.spans[0]+1
}

func maxRawLength(groups []readGroup) int {
	n := 0
	for _, g := range groups {
		for _, ref := range g.refs {
			n = max(n, int(ref.loc.RawLength))
		}
	}
	return n
}

// Chunks calls fn for every distinct chunk of a disk map with the spans it
// fills (spans for which skip returns true are left out), fetching in pack
// order with parallel workers. fn runs concurrently; plain is valid only
// during the call. Used by copy jobs.
func Chunks(ctx context.Context, r *repo.Repository, m *repo.DiskMap, workers int, skip func(uint64) bool, fn func(x id.ID, spans []uint64, plain []byte) error) error {
	for from := uint64(0); from < m.Count(); from += planWindow {
		groups, _, err := plan(ctx, r, m, skip, func(uint64) {}, from, min(from+planWindow, m.Count()))
		if err != nil {
			return err
		}
		err = fetch(ctx, r, groups, workers, func(batch []*chunkRef, plain []byte) error {
			for _, ref := range batch {
				n := int(ref.loc.RawLength)
				if err := fn(ref.id, ref.spans, plain[:n]); err != nil {
					return err
				}
				plain = plain[n:]
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
