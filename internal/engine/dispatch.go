package engine

import (
	"context"
	"slices"
	"sort"
	"sync"
)

// The dispatcher is the engine's central scheduler. Every limit is a
// counted resource (a slot pool): "global", "host:<conn>/<host>",
// "datastore:<conn>/<ds>", "group:<name>", "repo:<name>", "policy:<name>",
// and "library:<name>" for a media library's drives (limiter.go).
// A unit of work (one VM task, or one storage-level batch) names the slots
// it needs; the dispatcher starts it only when ALL are free and takes them
// in one step under one mutex, so there is no lock ordering and no
// deadlock, and a unit waiting for a busy datastore never blocks a unit
// behind it in the queue that needs other resources.
//
// The queue is ordered longest first (expected bytes, then submission
// order), so the biggest VMs start early and the window ends with all
// streams busy instead of one straggler.
//
// Given workers (placement.go), each is one more pool, and a unit with a
// route also takes a slot of the least busy worker that can run it.
type dispatcher struct {
	mu     sync.Mutex
	res    map[string]*resource
	global *resource
	queue  []*unit
	seq    int64
	// running counts started units not yet done (for tests and progress).
	running int
	// fleet holds the workers once the engine was given any; nil: every
	// unit runs in this process, as before there were workers.
	fleet *fleet
	// heldVMs counts the held units (Hold) by VM, "conn/id".
	heldVMs map[string]int
	// notes are calls to make once the mutex is released (unlock): a
	// unit's waiting reason goes to its job's log, which has locks of
	// its own.
	notes []func()
	// shared are pools every queued unit needs (its policy's, its
	// repository's), worked out as units are queued (share): once one
	// is full, no queued unit can start, and the pump stops there
	// rather than look at each of them. A run queues its every VM at
	// once, and its repository's few streams free one at a time:
	// looking at the whole queue at each was most of the pump's cost.
	// A unit leaving the queue leaves it true (of fewer units), if
	// shorter than it could be until the queue empties.
	shared []*resource
}

type resource struct {
	key  string
	cap  int // > 0
	used int
}

// need is a number of slots of one resource.
type need struct {
	r *resource
	n int
}

// unit is schedulable work. run executes in its own goroutine and must
// call dispatcher.done exactly once when it no longer needs its slots.
type unit struct {
	owner  *Job
	needs  []need
	size   int64
	seq    int64
	run    func(u *unit)
	drop   func() // the unit will never run (job cancelled while queued)
	queued bool
	// route is what the unit needs of a worker; nil: it runs in this
	// process and takes no worker's slot (a Limiter's unit).
	route *Route
	// worker is where the unit runs while started (nil: this process).
	worker *workerPool
	// vm is the VM of a VM's unit, "conn/id" ("": a batch or a
	// Limiter's unit): it waits while a held unit of its VM runs.
	vm string
	// waiting is why the unit cannot be placed ("" : it can, when slots
	// free); onWait, if set, is told when that changes.
	waiting string
	onWait  func(why string)
	// ctx is the running attempt's: cancelled with ErrWorkerLost when
	// its worker is lost, and when the unit is done.
	ctx   context.Context
	abort context.CancelCauseFunc
	// The workers that cover route, and why none does, as of the live
	// set numbered placedGen (fleet.place).
	placedGen int64
	eligible  []*workerPool
	unreached string
	// inFleet: the engine had workers when the unit started, so it reads
	// at most its share of limits.rate (Job.rateShare).
	inFleet bool
}

func newDispatcher(globalCap int) *dispatcher {
	d := &dispatcher{res: map[string]*resource{}}
	d.global = d.resource("global", globalCap)
	return d
}

// resource returns the pool for key, creating it with capacity cap; a cap
// of 0 or less means unlimited and returns nil. An existing pool takes the
// newest capacity (limits may change between jobs).
func (d *dispatcher) resource(key string, cap int) *resource {
	if cap <= 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.res[key]
	if r == nil {
		r = &resource{key: key}
		d.res[key] = r
	}
	r.cap = cap
	return r
}

// setCapacity changes a pool's capacity (a reload) and starts what now
// fits; a unit already running keeps its slots, so a pool made smaller is
// over its capacity until enough of them are done.
func (d *dispatcher) setCapacity(r *resource, cap int) {
	if r == nil || cap <= 0 {
		return
	}
	d.mu.Lock()
	defer d.unlock()
	r.cap = cap
	d.pumpLocked()
}

// needsOf merges resources into needs, counting repeats; nil entries
// (unlimited) are dropped.
func needsOf(rs ...*resource) []need {
	var out []need
outer:
	for _, r := range rs {
		if r == nil {
			continue
		}
		for i := range out {
			if out[i].r == r {
				out[i].n++
				continue outer
			}
		}
		out = append(out, need{r, 1})
	}
	return out
}

// submit queues units and starts whatever fits.
func (d *dispatcher) submit(us ...*unit) {
	d.mu.Lock()
	defer d.unlock()
	for _, u := range us {
		d.seq++
		u.seq, u.queued = d.seq, true
	}
	d.share(us)
	if len(us) == 1 {
		i := sort.Search(len(d.queue), func(i int) bool { return before(us[0], d.queue[i]) })
		d.queue = append(d.queue, nil)
		copy(d.queue[i+1:], d.queue[i:])
		d.queue[i] = us[0]
	} else {
		d.queue = append(d.queue, us...)
		sort.SliceStable(d.queue, func(i, j int) bool { return before(d.queue[i], d.queue[j]) })
	}
	d.pumpLocked()
}

func before(a, b *unit) bool {
	if a.size != b.size {
		return a.size > b.size
	}
	return a.seq < b.seq
}

// done returns a unit's slots, its worker's included, and starts what
// now fits.
func (d *dispatcher) done(u *unit) {
	d.mu.Lock()
	defer d.unlock()
	for _, n := range u.needs {
		n.r.used -= n.n
	}
	if u.worker != nil {
		d.fleet.release(u)
	}
	if u.abort != nil {
		u.abort(nil)
	}
	d.running--
	d.pumpLocked()
}

// unlock releases the mutex, then makes the calls noted under it.
func (d *dispatcher) unlock() {
	notes := d.notes
	d.notes = nil
	d.mu.Unlock()
	for _, f := range notes {
		f()
	}
}

// pumpLocked starts every queued unit whose slots are all free, in queue
// order, skipping (not waiting for) units that do not fit. A unit with a
// route, given workers, also needs a worker that can run it with a free
// slot, taken in the same step (all or nothing).
func (d *dispatcher) pumpLocked() {
	kept := d.queue[:0]
	for i, u := range d.queue {
		if d.global != nil && d.global.used >= d.global.cap || anyFull(d.shared) {
			kept = append(kept, d.queue[i:]...) // nothing can start
			break
		}
		if why := d.heldVM(u); why != "" {
			d.noteWait(u, why)
			kept = append(kept, u)
			continue
		}
		var wp *workerPool
		if d.fleet != nil && u.route != nil {
			var why string
			wp, why = d.fleet.place(u)
			d.noteWait(u, why)
			if wp == nil {
				kept = append(kept, u)
				continue
			}
		}
		if !fits(u) {
			kept = append(kept, u)
			continue
		}
		for _, n := range u.needs {
			n.r.used += n.n
		}
		if wp != nil {
			d.fleet.take(wp, u)
		}
		if u.owner != nil {
			u.ctx, u.abort = context.WithCancelCause(u.owner.ctx)
		}
		u.queued = false
		u.inFleet = d.fleet != nil
		d.running++
		go u.run(u)
	}
	clear(d.queue[len(kept):])
	d.queue = kept
}

// share narrows the pools every queued unit needs to those that us,
// about to be queued, need too.
func (d *dispatcher) share(us []*unit) {
	if len(us) == 0 {
		return
	}
	if len(d.queue) == 0 {
		d.shared = d.shared[:0]
		for _, n := range us[0].needs {
			if n.n > 0 {
				d.shared = append(d.shared, n.r)
			}
		}
	}
	for _, u := range us {
		d.shared = slices.DeleteFunc(d.shared, func(r *resource) bool { return !u.takes(r) })
	}
}

// takes reports whether u needs a slot of r.
func (u *unit) takes(r *resource) bool {
	for _, n := range u.needs {
		if n.r == r && n.n > 0 {
			return true
		}
	}
	return false
}

func anyFull(rs []*resource) bool {
	for _, r := range rs {
		if r.used >= r.cap {
			return true
		}
	}
	return false
}

func fits(u *unit) bool {
	for _, n := range u.needs {
		if n.r.used+n.n > n.r.cap {
			return false
		}
	}
	return true
}

// cancel removes the queued units of a job and returns them.
func (d *dispatcher) cancel(owner *Job) []*unit {
	d.mu.Lock()
	defer d.unlock()
	var out []*unit
	kept := d.queue[:0]
	for _, u := range d.queue {
		if u.owner == owner {
			u.queued = false
			out = append(out, u)
			continue
		}
		kept = append(kept, u)
	}
	clear(d.queue[len(kept):])
	d.queue = kept
	return out
}

// Slot is one limit's pool: its key ("global", "host:lab/h1",
// "datastore:lab/ds1", "group:ctrl-a", "repo:main", "policy:nightly"),
// the slots in use and its capacity.
type Slot struct {
	Key         string
	InUse, Size int
}

// slots lists every pool in key order.
func (d *dispatcher) slots() []Slot {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Slot, 0, len(d.res))
	for _, r := range d.res {
		out = append(out, Slot{Key: r.key, InUse: r.used, Size: r.cap})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}
