package engine

import (
	"context"
	"slices"
	"sync"
)

// Limiter hands the slots of the limits' pools to work that is not a
// policy's job but must share its limits: a copy to media waits for a
// slot of its library's drives ("library:NAME", the library's
// drive-limit) and of the global pool (limits.tasks) before each drive
// writes. An engine's Limiter is its dispatcher, so that such work and
// the backups queue together, in the same order (largest first), and
// show in the same pools (Slots, the coffer_limit_slots metrics); a
// process that runs no engine makes its own with NewLimiter.
type Limiter struct {
	d *dispatcher
}

// NewLimiter makes a limiter of its own, whose global pool has tasks
// slots (limits.tasks, defaults applied).
func NewLimiter(tasks int) *Limiter { return &Limiter{d: newDispatcher(tasks)} }

// Limiter is the engine's own: what it hands out, the engine's jobs
// cannot take.
func (e *Engine) Limiter() *Limiter { return &Limiter{d: e.disp} }

// Acquire waits until one slot of the global pool and of each of needs
// (those of a positive capacity; the pools take the capacities given, as
// a job's do) can be taken at once, takes them, and returns the function
// that gives them back. size orders the wait among queued work, largest
// first, as a VM's expected bytes do; waiting, if set, is called when
// the slots are not free at once. When ctx ends first, nothing is held
// and ctx's error is returned.
func (l *Limiter) Acquire(ctx context.Context, size int64, waiting func(), needs ...SlotNeed) (release func(), err error) {
	rs := []*resource{l.d.global}
	for _, n := range needs {
		rs = append(rs, l.d.resource(n.Key, n.Cap))
	}
	started := make(chan struct{})
	u := &unit{needs: needsOf(rs...), size: size, run: func(*unit) { close(started) }}
	l.d.submit(u)
	if waiting != nil && l.d.isQueued(u) {
		waiting()
	}
	var once sync.Once
	release = func() { once.Do(func() { l.d.done(u) }) }
	select {
	case <-started:
		return release, nil
	case <-ctx.Done():
	}
	if !l.d.withdraw(u) {
		// Started as ctx ended: its slots are taken, give them back.
		<-started
		release()
	}
	return nil, ctx.Err()
}

// Slots lists the pools with the slots in use now.
func (l *Limiter) Slots() []Slot { return l.d.slots() }

func (d *dispatcher) isQueued(u *unit) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return u.queued
}

// withdraw removes a unit still queued and reports whether it was; a
// unit the dispatcher has started already holds its slots.
func (d *dispatcher) withdraw(u *unit) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !u.queued {
		return false
	}
	u.queued = false
	if i := slices.Index(d.queue, u); i >= 0 {
		d.queue = slices.Delete(d.queue, i, i+1)
	}
	return true
}
