package restore

import (
	"container/list"
	"context"
	"fmt"
	"io"
	"sync"

	"golang.org/x/sync/singleflight"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
)

// DiskReader reads a disk of a backup point at random offsets, straight
// from repository chunks: the engine behind single-file restore and instant
// recovery. Decoded chunks are kept in a bounded LRU cache; concurrent reads
// of the same chunk load it once. Safe for concurrent use.
type DiskReader struct {
	ctx   context.Context
	r     *repo.Repository
	m     *repo.DiskMap
	cache *chunkCache
	group singleflight.Group
	decs  sync.Pool

	allocOnce sync.Once
	alloc     []hypervisor.Extent
	allocErr  error
}

var _ io.ReaderAt = (*DiskReader)(nil)

// OpenDisk opens a disk of a snapshot for random access; cacheChunks bounds
// memory (cacheChunks x chunk size). ctx bounds every read.
func OpenDisk(ctx context.Context, r *repo.Repository, d repo.Disk, cacheChunks int) (*DiskReader, error) {
	m, err := r.OpenDiskMap(ctx, d.Map)
	if err != nil {
		return nil, err
	}
	dr := &DiskReader{ctx: ctx, r: r, m: m, cache: newChunkCache(max(cacheChunks, 2))}
	dr.decs.New = func() any {
		dec, err := r.NewDecoder()
		if err != nil {
			panic(err) // only fails on invalid options, which are constant
		}
		return dec
	}
	return dr, nil
}

// Size is the disk's size.
func (dr *DiskReader) Size() int64 { return dr.m.DiskSize() }

// ChunkSize is the span granularity.
func (dr *DiskReader) ChunkSize() int { return dr.m.ChunkSize() }

// Allocated returns the ranges holding data (computed once).
func (dr *DiskReader) Allocated() []hypervisor.Extent {
	dr.allocOnce.Do(func() { dr.alloc, dr.allocErr = Allocated(dr.ctx, dr.m) })
	return dr.alloc
}

// IsZero reports whether span i is a hole.
func (dr *DiskReader) IsZero(i uint64) (bool, error) {
	x, err := dr.m.Get(dr.ctx, i)
	return x.IsZero(), err
}

// ReadAt implements io.ReaderAt.
func (dr *DiskReader) ReadAt(p []byte, off int64) (int, error) {
	size := dr.m.DiskSize()
	if off < 0 {
		return 0, fmt.Errorf("negative offset %d", off)
	}
	if off >= size {
		return 0, io.EOF
	}
	want := len(p)
	if int64(want) > size-off {
		p = p[:size-off]
	}
	cs := int64(dr.m.ChunkSize())
	n := 0
	for n < len(p) {
		pos := off + int64(n)
		i := uint64(pos / cs)
		within := pos % cs
		x, err := dr.m.Get(dr.ctx, i)
		if err != nil {
			return n, err
		}
		span := int64(dr.m.SpanLength(i))
		k := int(min(span-within, int64(len(p)-n)))
		if x == repo.LostChunk {
			return n, fmt.Errorf("offset %d: %w", pos, ErrLostSpan)
		}
		if x.IsZero() {
			clear(p[n : n+k])
		} else {
			data, err := dr.chunk(x, int(span))
			if err != nil {
				return n, fmt.Errorf("offset %d: %w", pos, err)
			}
			copy(p[n:n+k], data[within:])
		}
		n += k
	}
	if n < want {
		return n, io.EOF
	}
	return n, nil
}

func (dr *DiskReader) chunk(x id.ID, size int) ([]byte, error) {
	if b, ok := dr.cache.get(x); ok {
		return b, nil
	}
	v, err, _ := dr.group.Do(string(x[:]), func() (any, error) {
		if b, ok := dr.cache.get(x); ok {
			return b, nil
		}
		dec := dr.decs.Get().(*repo.Decoder)
		defer dr.decs.Put(dec)
		b, err := dr.r.LoadChunk(dr.ctx, x, dec, make([]byte, 0, size))
		if err != nil {
			return nil, err
		}
		dr.cache.put(x, b)
		return b, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// CacheChunks converts a memory budget for a DiskReader's chunk cache into
// a number of chunks of chunkSize bytes (at least 2). Callers budget in
// bytes: a count of chunks fixed for 1 MiB chunks would take 4 or 16 times
// the memory on a repository with 4 or 16 MiB chunks.
func CacheChunks(budget int64, chunkSize int) int {
	if chunkSize <= 0 {
		chunkSize = 1 << 20
	}
	return int(max(budget/int64(chunkSize), 2))
}

// chunkCache is an LRU of decoded chunks.
type chunkCache struct {
	mu    sync.Mutex
	max   int
	order *list.List
	items map[id.ID]*list.Element
}

type cached struct {
	x id.ID
	b []byte
}

func newChunkCache(max int) *chunkCache {
	return &chunkCache{max: max, order: list.New(), items: map[id.ID]*list.Element{}}
}

func (c *chunkCache) get(x id.ID) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[x]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*cached).b, true
	}
	return nil, false
}

func (c *chunkCache) put(x id.ID, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[x]; ok {
		return
	}
	c.items[x] = c.order.PushFront(&cached{x, b})
	for c.order.Len() > c.max {
		el := c.order.Back()
		c.order.Remove(el)
		delete(c.items, el.Value.(*cached).x)
	}
}
