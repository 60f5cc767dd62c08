package backup

import (
	"context"
	"sync"

	"github.com/coffer-backup/coffer/internal/id"
)

// idOrder hands the chunk IDs of a disk's spans to the disk map in span
// order while workers finish spans out of order. It holds the IDs of the
// spans in flight and runs of spans the feeder decided without reading
// (holes, spans reused from the previous point), not one ID per span of
// the disk: a backup's memory stays flat as the disk grows (issue 42; the
// list it replaced was 8 MiB at 64 GiB with 256 KiB chunks).
type idOrder struct {
	mu   sync.Mutex
	ctx  context.Context // for reading prev
	prev Previous
	// out receives span i's ID, for i = 0, 1, 2... under mu.
	out  func(i int, x id.ID) error
	next int
	// runs are the spans from next on, in feed order; a run of kind
	// spanRead takes its IDs from done as workers set them.
	runs []idRun
	done map[int]id.ID
	err  error
	// maxRuns bounds runs and done together: the feeder decides holes
	// and reused spans without reading, so without a bound it could run
	// ahead of a slow read by the whole disk, a run per change of kind,
	// and other workers' IDs could pile up behind that read.
	maxRuns int
	room    chan struct{} // signalled when runs shrink
}

// defaultMaxRuns bounds an order's runs and IDs waiting to about 200 KiB.
const defaultMaxRuns = 4096

type spanKind uint8

const (
	spanHole spanKind = iota // zero ID
	spanPrev                 // the previous point's ID at the same span
	spanRead                 // set by a worker
)

// idRun is spans [from, to) of one kind.
type idRun struct {
	from, to int
	kind     spanKind
}

func newIDOrder(ctx context.Context, prev Previous, out func(i int, x id.ID) error) *idOrder {
	return &idOrder{ctx: ctx, prev: prev, out: out, done: map[int]id.ID{}, maxRuns: defaultMaxRuns, room: make(chan struct{}, 1)}
}

// full reports whether the feeder must wait for room (waitRoom) before
// feeding more spans.
func (o *idOrder) full() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.runs)+len(o.done) >= o.maxRuns && o.err == nil
}

// waitRoom waits until runs are below their bound, the order failed or
// ctx ends. The spans the runs wait for must be on their way to workers
// (the feeder flushes its batch first).
func (o *idOrder) waitRoom(ctx context.Context) error {
	for o.full() {
		select {
		case <-o.room:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// feed records how span i, the next one in order, gets its ID. The feeder
// calls it for every span, before the span reaches a worker.
func (o *idOrder) feed(i int, kind spanKind) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if n := len(o.runs); n > 0 && o.runs[n-1].kind == kind && o.runs[n-1].to == i {
		o.runs[n-1].to++
	} else {
		o.runs = append(o.runs, idRun{from: i, to: i + 1, kind: kind})
	}
	if kind == spanRead {
		return o.err // waits for set
	}
	return o.drain()
}

// set gives span i's ID, found by a worker.
func (o *idOrder) set(i int, x id.ID) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.done[i] = x
	return o.drain()
}

// drain passes on every ID known from next on, in order, and tells a
// waiting feeder when that made room.
func (o *idOrder) drain() error {
	from := o.next
	err := o.pass()
	if o.next != from {
		select {
		case o.room <- struct{}{}:
		default:
		}
	}
	return err
}

func (o *idOrder) pass() error {
	for o.err == nil && len(o.runs) > 0 {
		r := &o.runs[0]
		for ; o.next < r.to; o.next++ {
			var x id.ID
			switch r.kind {
			case spanPrev:
				if x, o.err = o.prev.At(o.ctx, o.next); o.err != nil {
					return o.err
				}
			case spanRead:
				var ok bool
				if x, ok = o.done[o.next]; !ok {
					return nil
				}
				delete(o.done, o.next)
			}
			if o.err = o.out(o.next, x); o.err != nil {
				return o.err
			}
		}
		o.runs = o.runs[1:]
	}
	return o.err
}

// passed is how many spans' IDs went out; every span's, once the
// pipeline has finished without error.
func (o *idOrder) passed() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.next
}
