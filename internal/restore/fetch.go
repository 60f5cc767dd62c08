package restore

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/diskmap"
	"github.com/coffer-backup/coffer/internal/repo/pack"
)

// fetch reads the planned groups with parallel workers (one request per
// group), verifies and decodes every chunk, and calls fn for each, from
// several goroutines at once. The plaintext is only valid during the call.
func fetch(ctx context.Context, r *repo.Repository, groups []readGroup, workers int, fn func(ref *chunkRef, plain []byte) error) error {
	if workers <= 0 {
		workers = max(runtime.GOMAXPROCS(0), r.Store().Properties().Connections)
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
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dec, err := r.NewDecoder()
			if err != nil {
				fail(err)
				return
			}
			var plain, buf []byte
			for g := range jobs {
				// One reused buffer per worker keeps memory at workers x 8 MiB.
				buf, err = readRange(ctx, r.Store(), pack.ObjectName(g.pack), g.offset, g.length, buf)
				if err != nil {
					fail(fmt.Errorf("read pack %s: %w", g.pack, err))
					return
				}
				for _, ref := range g.refs {
					off := int64(ref.loc.Offset) - g.offset
					plain, err = dec.Decode(plain[:0], buf[off:off+int64(ref.loc.Length)], ref.id, int(ref.loc.RawLength))
					if err == nil {
						err = fn(ref, plain)
					} else {
						err = fmt.Errorf("span %d: %w", ref.spans[0], err)
					}
					if err != nil {
						fail(err)
						return
					}
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

// Chunks calls fn for every distinct chunk of a disk map with the spans it
// fills (spans for which skip returns true are left out), fetching in pack
// order with parallel workers. fn runs concurrently; plain is valid only
// during the call. Used by copy jobs.
func Chunks(ctx context.Context, r *repo.Repository, m *diskmap.Map, workers int, skip func(uint64) bool, fn func(x id.ID, spans []uint64, plain []byte) error) error {
	groups, _, err := plan(ctx, r, m, skip)
	if err != nil {
		return err
	}
	return fetch(ctx, r, groups, workers, func(ref *chunkRef, plain []byte) error { return fn(ref.id, ref.spans, plain) })
}
