package qemu

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/nbd"
)

// diskReader reads one fleecing export over several NBD connections,
// redialling a connection that drops.
type diskReader struct {
	network string
	sock    string
	d       journalDisk
	pool    chan *nbd.Conn
	size    int64
	mu      sync.Mutex
	all     []*nbd.Conn
	closed  bool
	retries int
}

func openReader(ctx context.Context, network, sock string, d journalDisk, conns int) (*diskReader, error) {
	r := &diskReader{network: network, sock: sock, d: d, pool: make(chan *nbd.Conn, conns), retries: 3}
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
	c, err := nbd.Dial(ctx, r.network, r.sock, nbd.ClientOptions{Export: r.d.Export, MetaContexts: contexts})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", hypervisor.ErrTransient, err)
	}
	r.mu.Lock()
	r.all = append(r.all, c)
	r.mu.Unlock()
	return c, nil
}

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
		if err == nil {
			return n, nil
		}
		var ne *nbd.Error
		if errors.As(err, &ne) && ne.Errno == 22 {
			// copy-before-write broke the snapshot rather than fail a guest
			// write (its temporary space or time ran out).
			return n, fmt.Errorf("%w: the point-in-time snapshot of %s broke (fleecing space or copy-before-write timeout exhausted); the VM kept running: %v",
				hypervisor.ErrSnapshotSpace, r.d.ID, err)
		}
		if !errors.Is(err, nbd.ErrBroken) {
			return n, err
		}
		lastErr = err
		c.Close()
		c = nil
	}
	return 0, fmt.Errorf("qemu: reading %s: %w", r.d.ID, lastErr)
}

// extents walks one meta context on its own connection (QEMU fails a
// block-status request as a whole when one of several contexts errors).
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

// Allocated implements hypervisor.DiskReader: the snapshot's view of the
// allocation, holes and zero clusters excluded.
func (r *diskReader) Allocated(ctx context.Context) ([]hypervisor.Extent, error) {
	return r.extents(ctx, nbd.ContextAllocation, func(f uint32) bool { return f&nbd.StateZero == 0 })
}

// Changed implements hypervisor.DiskReader.
func (r *diskReader) Changed(ctx context.Context) ([]hypervisor.Extent, bool, error) {
	bm := r.d.exportBitmap()
	if r.d.Changes == "full" || bm == "" {
		return nil, false, nil
	}
	ext, err := r.extents(ctx, "qemu:dirty-bitmap:"+bm, func(f uint32) bool { return f&nbd.StateDirty != 0 })
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
