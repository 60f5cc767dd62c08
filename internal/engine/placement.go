package engine

import (
	"errors"
	"fmt"
	"sort"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// Workers in the dispatcher. Each worker is a pool "worker:<name>" of
// its slots, counted under the dispatcher's mutex like every other limit,
// so a unit takes its worker's slot and all its other slots in one step.
// Among the workers whose reach covers a unit's route, it takes the least
// busy (slots in use relative to its slots), as Veeam picks the least
// busy eligible proxy: the load spreads over the workers that can share
// it, and host-bound units go to their host's worker whatever its load.
// Ties go to the worker granted a slot least recently, then by name. A
// tie by name alone starves the last worker whenever the units in flight
// are not a multiple of the workers: 5 over 3 run as 2, 2 and 1, and the
// freed slot of either busy worker ties with the third and wins by name,
// so the third runs half as many (measured 37, 35 and 18 units of 90).
//
// A worker that leaves the set (drained) takes no new unit; its pool goes
// when its last unit is done. A lost worker's running units have their
// attempts cancelled with ErrWorkerLost, a transient failure: each is
// retried as any transient failure is (counting the attempt, back into
// longest-first order), on a worker that can run it.

// ErrWorkerLost is the cause of an attempt whose worker was lost; it is
// transient, so the attempt is retried like any other that was.
var ErrWorkerLost = fmt.Errorf("%w: worker lost", hypervisor.ErrTransient)

type fleet struct {
	d       *dispatcher
	workers map[string]*workerPool
	order   []*workerPool // live workers by name
	grants  int64         // slots granted so far, numbering lastGrant
	// gen numbers the live set (reorder): a unit's eligible workers
	// are worked out again once it changed.
	gen int64
}

type workerPool struct {
	name  string // w.Name, unchanging: read by the unit's goroutine without the mutex
	w     Worker
	r     *resource
	gone  bool // drained or lost: no new units
	units map[*unit]struct{}
	// lastGrant numbers the worker's latest slot granted (0: none yet).
	lastGrant int64
}

// place is the least busy worker whose reach covers u's route with a
// free slot. With none, why says what no live worker reaches ("" when
// some can run the unit but are full: it waits for a slot as for any
// other pool). The workers that cover the route are worked out once per
// change of the live set (gen), not at every look: the dispatcher looks
// at every queued unit whenever a slot frees.
func (f *fleet) place(u *unit) (best *workerPool, why string) {
	if u.placedGen != f.gen {
		u.placedGen, u.eligible, u.unreached = f.gen, u.eligible[:0], ""
		for _, wp := range f.order {
			if wp.w.Covers(*u.route) {
				u.eligible = append(u.eligible, wp)
			}
		}
		if len(u.eligible) == 0 {
			live := make([]Worker, len(f.order))
			for i, wp := range f.order {
				live[i] = wp.w
			}
			u.unreached = Unreached(live, *u.route)
		}
	}
	for _, wp := range u.eligible {
		if wp.r.used >= wp.r.cap {
			continue
		}
		if best == nil || lessBusy(wp, best) {
			best = wp
		}
	}
	return best, u.unreached
}

// lessBusy orders workers for a grant: fewer slots in use relative to
// their slots (compared without division), then granted less recently;
// f.order's name order settles the rest.
func lessBusy(a, b *workerPool) bool {
	if x, y := a.r.used*b.r.cap, b.r.used*a.r.cap; x != y {
		return x < y
	}
	return a.lastGrant < b.lastGrant
}

func (f *fleet) take(wp *workerPool, u *unit) {
	f.grants++
	wp.lastGrant = f.grants
	wp.r.used++
	wp.units[u] = struct{}{}
	u.worker = wp
}

// release gives a done unit's worker slot back; a worker gone with its
// last unit leaves the pools.
func (f *fleet) release(u *unit) {
	wp := u.worker
	u.worker = nil
	wp.r.used--
	delete(wp.units, u)
	if wp.gone && len(wp.units) == 0 {
		f.remove(wp)
	}
}

func (f *fleet) remove(wp *workerPool) {
	if f.workers[wp.name] == wp {
		delete(f.workers, wp.name)
		if wp.r.used == 0 { // else held (Hold): its count stays for the worker's return
			delete(f.d.res, wp.r.key)
		}
	}
}

// reorder rebuilds the live workers' order after a change.
func (f *fleet) reorder() {
	f.gen++
	f.order = f.order[:0]
	for _, wp := range f.workers {
		if !wp.gone {
			f.order = append(f.order, wp)
		}
	}
	sort.Slice(f.order, func(i, j int) bool { return f.order[i].name < f.order[j].name })
}

// noteWait records why a unit cannot be placed, telling its job when the
// reason changes (after the mutex is released).
func (d *dispatcher) noteWait(u *unit, why string) {
	if u.waiting == why {
		return
	}
	u.waiting = why
	if u.onWait != nil && why != "" {
		f := u.onWait
		d.notes = append(d.notes, func() { f(why) })
	}
}

// setWorkers makes ws the live workers: new ones join, changed ones take
// their new slots and reach, and the others are drained.
func (d *dispatcher) setWorkers(ws []Worker) error {
	seen := map[string]bool{}
	for _, w := range ws {
		switch {
		case w.Name == "":
			return errors.New("engine: a worker without a name")
		case seen[w.Name]:
			return fmt.Errorf("engine: worker %s given twice", w.Name)
		case w.Slots < 1:
			return fmt.Errorf("engine: worker %s has %d slots, at least 1 is needed", w.Name, w.Slots)
		}
		seen[w.Name] = true
	}
	d.mu.Lock()
	defer d.unlock()
	if d.fleet == nil {
		d.fleet = &fleet{d: d, workers: map[string]*workerPool{}}
	}
	f := d.fleet
	for _, w := range ws {
		wp := f.workers[w.Name]
		if wp == nil {
			key := workerKey(w.Name)
			r := d.res[key] // held already (Hold), or new
			if r == nil {
				r = &resource{key: key}
			}
			wp = &workerPool{name: w.Name, r: r, units: map[*unit]struct{}{}}
			f.workers[w.Name] = wp
			d.res[key] = wp.r
		}
		wp.w, wp.r.cap, wp.gone = w, w.Slots, false
	}
	for name, wp := range f.workers {
		if !seen[name] {
			wp.gone = true
			if len(wp.units) == 0 {
				f.remove(wp)
			}
		}
	}
	f.reorder()
	d.pumpLocked()
	return nil
}

// workerLost takes a worker out at once and cancels its running units'
// attempts with ErrWorkerLost; it returns how many it cancelled.
func (d *dispatcher) workerLost(name string) int {
	d.mu.Lock()
	var aborts []func()
	if f := d.fleet; f != nil {
		if wp := f.workers[name]; wp != nil {
			wp.gone = true
			for u := range wp.units {
				// The attempt's own cancel, taken now: once done, the
				// unit may start again elsewhere with another.
				if abort := u.abort; abort != nil {
					aborts = append(aborts, func() { abort(ErrWorkerLost) })
				}
			}
			if len(wp.units) == 0 {
				f.remove(wp)
			}
			f.reorder()
		}
	}
	d.unlock()
	for _, a := range aborts {
		a()
	}
	return len(aborts)
}

// WorkerLoad is a worker as the dispatcher sees it.
type WorkerLoad struct {
	Worker
	InUse int
	// Gone: drained or lost, finishing the units it runs.
	Gone bool
}

func (d *dispatcher) workers() []WorkerLoad {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fleet == nil {
		return nil
	}
	var out []WorkerLoad
	for _, wp := range d.fleet.workers {
		out = append(out, WorkerLoad{Worker: wp.w, InUse: wp.r.used, Gone: wp.gone})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// SetWorkers makes ws the workers the engine places units on (the worker
// registry's live set, given again whenever it changes): a worker joins,
// takes new slots or reach, or, left out, is drained: it takes no new
// unit and its running ones finish. Once given workers, even none, the
// engine runs every VM unit on a worker, and a unit that no live worker
// can run waits and says why in its job's log ("no worker reaches host
// kvm7"). An engine never given workers runs everything in its own
// process, as before.
func (e *Engine) SetWorkers(ws []Worker) error { return e.disp.setWorkers(ws) }

// WorkerLost takes a worker that stopped heartbeating out at once: its
// pool takes no unit, and its running attempts are cancelled with
// ErrWorkerLost, so each counts as a transient failure and is retried on
// a worker that can run it (or on its return), its slots given back when
// the runner returns (UnitRunner). It returns the attempts cancelled.
func (e *Engine) WorkerLost(name string) int { return e.disp.workerLost(name) }

// Workers lists the workers with their slots in use (nil: never given).
func (e *Engine) Workers() []WorkerLoad { return e.disp.workers() }
