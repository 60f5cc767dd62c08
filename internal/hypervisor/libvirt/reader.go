package libvirt

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/nbd"
)

// diskReader reads one disk of a pull backup over several NBD connections
// to libvirt's export, redialling a connection that drops.
type diskReader struct {
	sock    string
	d       sessionDisk
	pool    chan *nbd.Conn
	size    int64
	mu      sync.Mutex
	all     []*nbd.Conn
	closed  bool
	retries int
}

func openReader(ctx context.Context, sock string, d sessionDisk, conns int) (*diskReader, error) {
	r := &diskReader{sock: sock, d: d, pool: make(chan *nbd.Conn, conns), retries: 3}
	c, err := r.dial(ctx, nil)
	if err != nil {
		return nil, err
	}
	r.size = c.Size()
	r.pool <- c
	for i := 1; i < conns; i++ {
		r.pool <- nil // dialled on first use
	}
	return r, nil
}

func (r *diskReader) dial(ctx context.Context, contexts []string) (*nbd.Conn, error) {
	c, err := nbd.Dial(ctx, "unix", r.sock, nbd.ClientOptions{Export: r.d.Key, MetaContexts: contexts})
	if err != nil {
		return nil, fmt.Errorf("%w: libvirt export of %s: %v", hypervisor.ErrTransient, r.d.Key, err)
	}
	r.mu.Lock()
	r.all = append(r.all, c)
	r.mu.Unlock()
	return c, nil
}

// Size implements hypervisor.DiskReader.
func (r *diskReader) Size() int64 { return r.size }

// ReadAt implements io.ReaderAt.
func (r *diskReader) ReadAt(p []byte, off int64) (int, error) {
	ctx := context.Background()
	c := <-r.pool
	defer func() { r.pool <- c }()
	var lastErr error
	for attempt := 0; attempt <= r.retries; attempt++ {
		if c == nil {
			var err error
			if c, err = r.dial(ctx, nil); err != nil {
				lastErr = err
				continue
			}
		}
		n, err := c.ReadAtContext(ctx, p, off)
		if err == nil || !errors.Is(err, nbd.ErrBroken) {
			return n, err
		}
		lastErr = err
		c.Close()
		c = nil
	}
	return 0, fmt.Errorf("libvirt: reading %s: %w", r.d.Key, lastErr)
}

// extents walks one meta context on its own connection.
func (r *diskReader) extents(ctx context.Context, name string, keep func(uint32) bool) ([]hypervisor.Extent, error) {
	c, err := r.dial(ctx, []string{name})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	m, err := c.Map(ctx, name)
	if err != nil {
		return nil, err
	}
	out := []hypervisor.Extent{} // empty, not nil: nil would mean "the whole disk"
	for _, e := range m {
		if !keep(e.Flags) {
			continue
		}
		if k := len(out); k > 0 && out[k-1].Offset+out[k-1].Length == e.Offset {
			out[k-1].Length += e.Length
			continue
		}
		out = append(out, hypervisor.Extent{Offset: e.Offset, Length: e.Length})
	}
	return out, nil
}

// Allocated implements hypervisor.DiskReader: holes and zero clusters of
// the frozen image are never read.
func (r *diskReader) Allocated(ctx context.Context) ([]hypervisor.Extent, error) {
	return r.extents(ctx, nbd.ContextAllocation, func(f uint32) bool { return f&nbd.StateZero == 0 })
}

// Changed implements hypervisor.DiskReader: the ranges libvirt's merged
// checkpoint bitmaps mark dirty since the disk's base checkpoint.
func (r *diskReader) Changed(ctx context.Context) ([]hypervisor.Extent, bool, error) {
	if r.d.since == "" {
		return nil, false, nil
	}
	ext, err := r.extents(ctx, "qemu:dirty-bitmap:"+exportBitmap, func(f uint32) bool { return f&nbd.StateDirty != 0 })
	return ext, err == nil, err
}

// Close implements hypervisor.DiskReader.
func (r *diskReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	for _, c := range r.all {
		c.Close()
	}
	return nil
}
