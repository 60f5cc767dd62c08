package fake

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// reader reads one frozen disk: a VM session's, or a storage snapshot's
// (sess == nil). Block contents are generated from (disk seed, block,
// version), so equal versions read equal bytes everywhere.
type reader struct {
	// ctx is the context the disk was opened with: its reads end with it.
	ctx     context.Context
	c       *Connector
	sess    *session // nil for storage snapshots
	disk    *diskState
	frozen  map[int64]uint32
	changed map[int64]bool // nil: no change set
}

var blockPool = sync.Pool{New: func() any { b := make([]byte, BlockSize); return &b }}

func (r *reader) Size() int64 { return r.disk.info.Size }

func (r *reader) ReadAt(p []byte, off int64) (int, error) {
	if err := r.readable(); err != nil {
		return 0, err
	}
	size := r.disk.info.Size
	if off >= size {
		return 0, errors.New("fake: read beyond the end of the disk")
	}
	n := 0
	bp := blockPool.Get().(*[]byte)
	defer blockPool.Put(bp)
	for n < len(p) && off < size {
		if err := r.ctx.Err(); err != nil {
			return n, err // a long read ends with its disk's context
		}
		b, in := off/BlockSize, off%BlockSize
		if d := r.c.o.ReadDelay; d > 0 {
			if err := r.c.o.Sleep(r.ctx, d); err != nil {
				return n, err
			}
		}
		if r.c.o.Hold != nil {
			if err := r.c.o.Hold(r.ctx, b); err != nil {
				return n, err
			}
		}
		r.block(b, *bp)
		m := copy(p[n:], (*bp)[in:min(BlockSize, size-b*BlockSize)])
		n += m
		off += int64(m)
	}
	if n < len(p) {
		return n, fmt.Errorf("fake: short read at the end of the disk")
	}
	return n, nil
}

func (r *reader) readable() error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	if r.sess != nil {
		switch {
		case r.sess.dead || r.sess.closed:
			return errors.New("fake: session closed")
		case r.sess.released:
			return errors.New("fake: VM snapshot released; read the storage snapshot instead")
		}
		if err := r.sess.st.fault.readErr; err != nil {
			return err
		}
	}
	return nil
}

// block puts the content of block b into buf: what WriteAt wrote, else
// generated.
func (r *reader) block(b int64, buf []byte) {
	if data, ok := r.disk.kept.Load(keptKey{b, r.frozen[b]}); ok {
		copy(buf, data.([]byte))
		return
	}
	r.generate(b, buf)
}

// generate generates the content of a block's version that WriteAt did
// not write.
func (r *reader) generate(b int64, buf []byte) {
	v := r.frozen[b]
	if v == 0 && !r.disk.alloc(b) {
		clear(buf)
		return
	}
	var seed [32]byte
	for i := range 4 {
		h := mix(r.disk.seed, uint64(b), uint64(v), uint64(i))
		for j := range 8 {
			seed[i*8+j] = byte(h >> (8 * j))
		}
	}
	_, _ = rand.NewChaCha8(seed).Read(buf)
}

func (r *reader) allocated(b int64) bool { return r.frozen[b] > 0 || r.disk.alloc(b) }

func (r *reader) Allocated(ctx context.Context) ([]hypervisor.Extent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []hypervisor.Extent
	blocks := (r.disk.info.Size + BlockSize - 1) / BlockSize
	for b := range blocks {
		if r.allocated(b) {
			out = appendBlock(out, b, r.disk.info.Size)
		}
	}
	return out, nil
}

func (r *reader) Changed(ctx context.Context) ([]hypervisor.Extent, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if r.changed == nil {
		return nil, false, nil
	}
	blocks := make([]int64, 0, len(r.changed))
	for b := range r.changed {
		blocks = append(blocks, b)
	}
	sort.Slice(blocks, func(i, j int) bool { return blocks[i] < blocks[j] })
	var out []hypervisor.Extent
	for _, b := range blocks {
		out = appendBlock(out, b, r.disk.info.Size)
	}
	return out, true, nil
}

// appendBlock adds block b to sorted extents, merging neighbours.
func appendBlock(out []hypervisor.Extent, b, size int64) []hypervisor.Extent {
	off := b * BlockSize
	n := min(BlockSize, size-off)
	if k := len(out); k > 0 && out[k-1].Offset+out[k-1].Length == off {
		out[k-1].Length += n
		return out
	}
	return append(out, hypervisor.Extent{Offset: off, Length: n})
}

func (r *reader) Close() error { return nil }

func hashString(s string) uint64 {
	var h uint64 = 14695981039346656037
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
