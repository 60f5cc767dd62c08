package backup

import (
	"context"
	"testing"
)

// A read pool makes buffers only when asked, never more than its bound,
// hands out released ones again, and gives them to the next disk's pool
// of the same size once closed.
func TestReadPoolMakesBuffersOnDemand(t *testing.T) {
	p := newReadPool(2, 4096)
	ctx := context.Background()
	a := p.get(ctx)
	b := p.get(ctx)
	if a == nil || b == nil || a == b || p.made != 2 {
		t.Fatalf("two gets: %p %p, made %d", a, b, p.made)
	}
	if len(a.buf) != 4096 {
		t.Fatalf("buffer of %d bytes, want 4096", len(a.buf))
	}

	// At the bound, get waits for a release, or for ctx to end.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if got := p.get(cancelled); got != nil {
		t.Fatalf("get past the bound with ctx ended returned a buffer")
	}
	a.refs.Store(2) // a read of two spans: free after both workers release
	a.release()
	select {
	case <-p.free:
		t.Fatal("buffer freed while a span still used it")
	default:
	}
	a.release()
	if got := p.get(ctx); got != a || p.made != 2 {
		t.Fatalf("after release: got %p want %p, made %d", got, a, p.made)
	}

	// Closed, the pool's free buffers go to the process-wide pool; the
	// next pool of this size may reuse them (sync.Pool may also drop
	// them, so only the size and ownership are checked).
	a.refs.Store(1)
	a.release()
	p.close()
	if a.pool != nil {
		t.Fatal("a buffer returned to the shared pool still points at its disk's pool")
	}
	q := newReadPool(1, 4096)
	c := q.get(ctx)
	if c == nil || len(c.buf) != 4096 || c.pool != q {
		t.Fatalf("next pool's buffer: %+v", c)
	}
}
