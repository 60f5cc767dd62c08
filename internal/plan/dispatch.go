package plan

import "container/heap"

// The engine's dispatcher (internal/engine, dispatcher.pumpLocked) starts,
// whenever slots are freed, every queued unit whose slots are all free,
// in queue order, skipping those that do not fit. Scanning the whole
// queue at every end would make a plan of 10,000 VMs quadratic, so the
// simulation keeps each queued task in the waiting list of the pool that
// last stopped it, and at an end looks only at the lists of the pools it
// freed, merged in queue order: a task elsewhere waits for a pool still
// full, so it could not start either. A list whose pool is full again is
// left alone, and a task that still does not fit is put back only after
// the pump, because within one pump slots only get taken.

// pumpAll is the first pump: every task in queue order.
func (r *run) pumpAll() {
	for _, i := range r.c.order {
		r.consider(i, -1, nil)
	}
	r.requeue()
}

// consider starts task i if it fits, else notes it to wait for the pool
// that stopped it.
func (r *run) consider(i, pred int32, wasFull []int32) bool {
	if p := r.stoppedBy(i); p >= 0 {
		r.deferred = append(r.deferred, waiter{p, r.c.pos[i]})
		return false
	}
	s := &r.tasks[i]
	held := r.c.needs[i]
	if set := r.c.fleet.setOf[i]; set >= 0 {
		held = r.place(i, r.pickWorker(set))
	}
	s.start, s.pred, s.blocker = r.now, pred, blockerOf(held, wasFull)
	for _, p := range held {
		r.used[p]++
		r.peak[p] = max(r.peak[p], r.used[p])
		if r.used[p] >= r.c.pools[p].cap {
			r.full[p].set(true, r.now)
		}
	}
	r.next(i)
	return true
}

// stoppedBy is the first pool task i does not fit in, then the list of
// its eligible workers when none has a free slot; -1 when it fits.
func (r *run) stoppedBy(i int32) int32 {
	ns := r.c.needs[i]
	for k, p := range ns {
		n := 1
		for _, q := range ns[:k] { // a pool named twice (two disks on one datastore) takes two slots
			if q == p {
				n++
			}
		}
		if r.used[p]+n > r.c.pools[p].cap {
			return p
		}
	}
	if set := r.c.fleet.setOf[i]; set >= 0 && r.pickWorker(set) < 0 {
		return r.setList(set)
	}
	return -1
}

// release gives a task's slots back and starts what now fits, noting
// which pools were full: what the tasks it starts were waiting for.
func (r *run) release(i int32) {
	wasFull := r.wasFull[:0]
	held := r.heldBy(i)
	for _, p := range held {
		if r.used[p] >= r.c.pools[p].cap {
			wasFull = append(wasFull, p)
		}
		r.used[p]--
		r.full[p].set(false, r.now)
	}
	r.wasFull = wasFull
	// Merge the lists of the pools it freed in queue order (a pool not
	// full may have stopped a task needing two of its slots).
	freed := r.freed[:0]
	for _, p := range held {
		if len(r.waiting[p]) > 0 {
			freed = append(freed, p)
		}
	}
	freed = r.workerLists(i, freed)
	r.freed = freed
	for {
		best := int32(-1)
		for _, p := range freed {
			w := r.waiting[p]
			if len(w) == 0 || r.blocked(p) {
				continue
			}
			if best < 0 || w[0] < r.waiting[best][0] {
				best = p
			}
		}
		if best < 0 {
			break
		}
		pos := heap.Pop((*posHeap)(&r.waiting[best])).(int32)
		r.consider(r.c.order[pos], i, wasFull)
	}
	r.requeue()
}

// requeue puts the tasks that did not fit into their pools' lists.
func (r *run) requeue() {
	for _, w := range r.deferred {
		heap.Push((*posHeap)(&r.waiting[w.pool]), w.pos)
	}
	r.deferred = r.deferred[:0]
}

type waiter struct {
	pool, pos int32
}

// blockerOf is the pool, of those the ending task freed while full, that
// a starting task needs: the most specific one (the global pool last).
func blockerOf(needs, wasFull []int32) int32 {
	b := int32(-1)
	for _, p := range wasFull {
		for _, q := range needs {
			if p == q && (b < 0 || b == globalPool) {
				b = p
			}
		}
	}
	return b
}

// posHeap is a waiting list: queue positions, the first on top.
type posHeap []int32

func (h posHeap) Len() int           { return len(h) }
func (h posHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h posHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *posHeap) Push(x any)        { *h = append(*h, x.(int32)) }
func (h *posHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}
