// Package nbdpool reads a disk a hypervisor exports over NBD (QEMU's
// fleecing export, libvirt's pull-mode backup export, a read-only
// qemu-nbd) through several connections at once, redialling one that
// drops, and walks the export's meta contexts (allocation, dirty bitmaps)
// into extents. The connectors differ only in which export they open and
// in what a failed read means; both are options.
package nbdpool

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/nbd"
)

// Options say which export to read and how.
type Options struct {
	Network, Socket, Export string
	// Conns is how many reads run at once (at least 1).
	Conns int
	// Name says in messages what is read ("qemu: disk vda").
	Name string
	// ReadError, when set, turns a failed read that is not a dropped
	// connection into the connector's own error (nil: returned as is).
	ReadError func(error) error
}

// Reader is an open export; it implements hypervisor.DiskReader's reads
// and Allocated, and gives the connectors Extents for their change sets.
type Reader struct {
	o Options
	// ctx is the context Open was given: reads end with it (a cancelled
	// job's backup stops reading), and it dials the connections later.
	ctx     context.Context
	pool    chan *nbd.Conn
	size    int64
	mu      sync.Mutex
	all     []*nbd.Conn
	closed  bool
	retries int
}

// Open dials the export once (its size) and leaves the other connections
// to be dialled on first use. Reads end with ctx.
func Open(ctx context.Context, o Options) (*Reader, error) {
	o.Conns = max(o.Conns, 1)
	r := &Reader{o: o, ctx: ctx, pool: make(chan *nbd.Conn, o.Conns), retries: 3}
	c, err := r.dial(ctx, nil)
	if err != nil {
		return nil, err
	}
	r.size = c.Size()
	r.pool <- c
	for i := 1; i < o.Conns; i++ {
		r.pool <- nil
	}
	return r, nil
}

func (r *Reader) dial(ctx context.Context, contexts []string) (*nbd.Conn, error) {
	c, err := nbd.Dial(ctx, r.o.Network, r.o.Socket, nbd.ClientOptions{Export: r.o.Export, MetaContexts: contexts})
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", hypervisor.ErrTransient, r.o.Name, err)
	}
	r.mu.Lock()
	r.all = append(r.all, c)
	r.mu.Unlock()
	return c, nil
}

// Size is the export's size in bytes.
func (r *Reader) Size() int64 { return r.size }

// ReadAt implements io.ReaderAt; a connection that drops is dialled again
// (up to three times) before the read fails. Once Open's context is done,
// reads fail with its error, and one in flight ends.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	ctx := r.ctx
	c := <-r.pool
	defer func() { r.pool <- c }()
	var lastErr error
	for attempt := 0; attempt <= r.retries; attempt++ {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("%s: %w", r.o.Name, err) // not a dropped connection to dial again
		}
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
		if !errors.Is(err, nbd.ErrBroken) {
			if r.o.ReadError != nil {
				err = r.o.ReadError(err)
			}
			return n, err
		}
		lastErr = err
		_ = c.Close()
		c = nil
	}
	return 0, fmt.Errorf("%s: %w", r.o.Name, lastErr)
}

// Extents walks one meta context on a connection of its own (QEMU fails
// a block-status request as a whole when one of several contexts errors)
// and returns the ranges whose flags keep accepts, adjacent ones merged.
func (r *Reader) Extents(ctx context.Context, name string, keep func(uint32) bool) ([]hypervisor.Extent, error) {
	c, err := r.dial(ctx, []string{name})
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()
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

// Allocated implements hypervisor.DiskReader: the exported image's
// allocation, holes and zero clusters excluded, so they are never read.
func (r *Reader) Allocated(ctx context.Context) ([]hypervisor.Extent, error) {
	return r.Extents(ctx, nbd.ContextAllocation, func(f uint32) bool { return f&nbd.StateZero == 0 })
}

// Dirty is the ranges the dirty bitmap exported as bitmap marks.
func (r *Reader) Dirty(ctx context.Context, bitmap string) ([]hypervisor.Extent, error) {
	return r.Extents(ctx, "qemu:dirty-bitmap:"+bitmap, func(f uint32) bool { return f&nbd.StateDirty != 0 })
}

// Close closes every connection.
func (r *Reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	for _, c := range r.all {
		_ = c.Close()
	}
	return nil
}
