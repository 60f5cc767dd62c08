package backup

import (
	"context"
	"fmt"
	"sync"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
)

// Previous gives the chunk IDs of a disk in the previous backup point,
// span by span. The pipeline asks for them nearly in span order: the
// feeder for the span it decides, workers for the spans in flight, the
// ID order for the spans it passes on.
type Previous interface {
	// Len is the number of spans.
	Len() int
	// At is span i's ID, 0 <= i < Len().
	At(ctx context.Context, i int) (id.ID, error)
}

// IDList is a Previous held in memory.
type IDList []id.ID

// Len implements Previous.
func (l IDList) Len() int { return len(l) }

// At implements Previous.
func (l IDList) At(_ context.Context, i int) (id.ID, error) { return l[i], nil }

// PreviousMap opens the disk map of disk key in snapshot s when it has
// the same geometry, or returns nil. Its IDs are read from the map as the
// backup reaches them, a few blocks at a time, not loaded whole: a
// backup's memory then stays flat as the disk grows, incrementals too
// (issue 42; the whole list was 8 MiB at 64 GiB with 256 KiB chunks).
func PreviousMap(ctx context.Context, r *repo.Repository, s *repo.Point, key string, size int64) (Previous, error) {
	m, err := openPreviousMap(ctx, r, s, key, size)
	if m == nil || err != nil {
		return nil, err
	}
	return &mapPrevious{m: m, n: int(m.Count())}, nil
}

// openPreviousMap opens the disk map of disk key in snapshot s when it
// has the same geometry (size and chunk size), or returns nil.
func openPreviousMap(ctx context.Context, r *repo.Repository, s *repo.Point, key string, size int64) (*repo.DiskMap, error) {
	if s == nil {
		return nil, nil
	}
	for _, d := range s.Disks {
		if d.Key == key && d.Size == size && d.ChunkSize == r.Config().ChunkSize {
			return r.OpenDiskMap(ctx, d.Map)
		}
	}
	return nil, nil
}

// prevBlockIDs is how many IDs mapPrevious reads at a time: one block of
// a stored disk map (internal/repo/diskmap's BlockIDs), 128 KiB of IDs.
const prevBlockIDs = 4096

// prevBlocks is how many blocks mapPrevious keeps: the spans the pipeline
// asks about lie between the ID order's next span and the feeder's, two
// or three blocks apart at most but for long runs of unchanged spans.
// Asked for a block it no longer holds, it reads it again: slower, not
// wrong. Memory: prevBlocks x 128 KiB.
const prevBlocks = 4

// mapPrevious reads a stored disk map's IDs a block at a time and keeps
// the prevBlocks blocks used last.
type mapPrevious struct {
	m *repo.DiskMap
	n int

	mu     sync.Mutex
	blocks [prevBlocks]prevBlock
	clock  uint64
}

type prevBlock struct {
	index int // block number; valid when ids != nil
	ids   []id.ID
	used  uint64
}

func (p *mapPrevious) Len() int { return p.n }

func (p *mapPrevious) At(ctx context.Context, i int) (id.ID, error) {
	if i < 0 || i >= p.n {
		return id.ID{}, fmt.Errorf("span %d beyond the previous point's %d", i, p.n)
	}
	b := i / prevBlockIDs
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clock++
	slot := &p.blocks[0] // a free slot, else the least recently used
	for k := range p.blocks {
		c := &p.blocks[k]
		if c.ids != nil && c.index == b {
			c.used = p.clock
			return c.ids[i-b*prevBlockIDs], nil
		}
		if slot.ids != nil && (c.ids == nil || c.used < slot.used) {
			slot = c
		}
	}
	// The slot's slice is reused for block b.
	ids := slot.ids[:0]
	from := b * prevBlockIDs
	err := p.m.IterateRange(ctx, uint64(from), uint64(min(from+prevBlockIDs, p.n)), func(_ uint64, x id.ID) error {
		ids = append(ids, x)
		return nil
	})
	if err != nil {
		slot.ids = nil
		return id.ID{}, fmt.Errorf("previous point's chunk IDs: %w", err)
	}
	if len(ids) != min(prevBlockIDs, p.n-from) {
		slot.ids = nil
		return id.ID{}, fmt.Errorf("previous point's disk map: block %d holds %d IDs", b, len(ids))
	}
	*slot = prevBlock{index: b, ids: ids, used: p.clock}
	return ids[i-from], nil
}

// samePrevious reports whether span i's ID x is the previous point's at
// the same span and that chunk is not lost: nothing to store then.
func (k *worker) samePrevious(ctx context.Context, i int, x id.ID) (bool, error) {
	if k.prev == nil {
		return false, nil
	}
	was, err := k.prev.At(ctx, i)
	if err != nil || was != x {
		return false, err
	}
	lost, err := k.w.Suspect(ctx, x)
	return !lost, err
}
