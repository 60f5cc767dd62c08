package plan

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"sort"
)

// Phases of a task, in order.
const (
	phaseQueued = iota
	phaseSnapshot
	phaseSetup
	phaseTransfer
	phaseRelease
	phaseDone
)

var phaseNames = [...]string{"queued", "snapshot create", "setup", "transfer", "snapshot remove", "done"}

// compiled is an Input with its pools and devices numbered, shared by
// every run of the Monte Carlo.
type compiled struct {
	in      *Input
	order   []int32 // task indices in the engine's queue order
	pools   []poolDef
	devices []deviceDef
	needs   [][]int32 // per task: pool indices (0 is the global pool), one per slot
	path    [][]crossing
}

type poolDef struct {
	key string
	cap int
}

type deviceDef struct {
	key  string
	rate float64 // bytes/s; +Inf for the per-task cap's pseudo-device
}

type crossing struct {
	dev    int32
	factor float64
}

const globalPool = 0

func compile(in *Input) *compiled {
	c := &compiled{in: in, needs: make([][]int32, len(in.Tasks)), path: make([][]crossing, len(in.Tasks))}
	poolIdx := map[string]int32{}
	pool := func(key string, cap int) int32 {
		if i, ok := poolIdx[key]; ok {
			return i
		}
		poolIdx[key] = int32(len(c.pools))
		c.pools = append(c.pools, poolDef{key, cap})
		return int32(len(c.pools) - 1)
	}
	pool("global", in.Concurrency)
	devIdx := map[string]int32{}
	for i, t := range in.Tasks {
		ns := []int32{globalPool}
		for _, n := range t.Pools {
			if n.Cap > 0 { // an unlimited pool takes no slot
				ns = append(ns, pool(n.Key, n.Cap))
			}
		}
		c.needs[i] = ns
		for _, x := range t.Path {
			rate, ok := in.Devices[x.Device]
			if !ok || rate <= 0 || x.Factor <= 0 {
				continue
			}
			d, ok := devIdx[x.Device]
			if !ok {
				d = int32(len(c.devices))
				devIdx[x.Device] = d
				c.devices = append(c.devices, deviceDef{x.Device, rate})
			}
			c.path[i] = append(c.path[i], crossing{d, x.Factor})
		}
	}
	c.order = make([]int32, len(in.Tasks))
	for i := range c.order {
		c.order[i] = int32(i)
	}
	// The engine's dispatcher: longest first, then submission order.
	sort.SliceStable(c.order, func(a, b int) bool { return in.Tasks[c.order[a]].Size > in.Tasks[c.order[b]].Size })
	return c
}

// taskState is one task during a run.
type taskState struct {
	phase     int8
	end       float64 // end of the current fixed phase
	remaining float64 // bytes left to transfer
	rate      float64
	limit     int32 // device limiting the transfer now; -1: the per-task rate
	start     float64
	done      float64
	cost      [3]float64 // sampled snapshot, setup, release seconds
	// pred is the task whose end started this one (-1: started at 0 or
	// by another start), blocker the pool it waited for (-1: none).
	pred, blocker int32
	// work is the task's time per cause (traced runs only): phase names
	// and, for transfers, the limiting device.
	work map[string]float64
}

// run is one simulated run.
type run struct {
	c       *compiled
	rng     *rand.Rand // nil: means only
	trace   bool
	now     float64
	tasks   []taskState
	queue   []int32
	used    []int
	peak    []int
	full    []interval // pools at capacity
	devUse  []float64
	devBusy []interval // devices saturated
	devN    []int32
	moving  []int32 // tasks in transfer
	events  eventHeap
	dirty   bool
	left    int
}

// interval accumulates the time a resource is busy, and its longest
// busy stretch.
type interval struct {
	on             bool
	since, total   float64
	longest, lfrom float64
}

func (v *interval) set(on bool, now float64) {
	if on == v.on {
		return
	}
	if v.on {
		d := now - v.since
		v.total += d
		if d > v.longest {
			v.longest, v.lfrom = d, v.since
		}
	}
	v.on, v.since = on, now
}

func newRun(c *compiled, rng *rand.Rand, trace bool) *run {
	r := &run{c: c, rng: rng, trace: trace, tasks: make([]taskState, len(c.in.Tasks)),
		used: make([]int, len(c.pools)), peak: make([]int, len(c.pools)), full: make([]interval, len(c.pools)),
		devUse: make([]float64, len(c.devices)), devBusy: make([]interval, len(c.devices)), devN: make([]int32, len(c.devices)),
		queue: append([]int32(nil), c.order...), left: len(c.in.Tasks)}
	for i, t := range c.in.Tasks {
		s := &r.tasks[i]
		s.cost = [3]float64{t.Snapshot.sample(rng), t.Setup.sample(rng), t.Release.sample(rng)}
		s.remaining = t.Bytes.sample(rng)
		s.pred, s.blocker = -1, -1
		if trace {
			s.work = map[string]float64{}
		}
	}
	return r
}

// simulate runs to the last task's end and returns it, in seconds.
func (r *run) simulate() float64 {
	r.pump(-1, nil)
	for r.left > 0 {
		if r.dirty {
			r.rates()
		}
		next := math.Inf(1)
		if len(r.events) > 0 {
			next = r.events[0].at
		}
		for _, i := range r.moving {
			s := &r.tasks[i]
			if at := r.now + s.remaining/s.rate; at < next {
				next = at
			}
		}
		if math.IsInf(next, 1) {
			break // nothing running and nothing can start: a pool of capacity 0 cannot happen (compile drops them)
		}
		r.advance(next)
		r.settle()
	}
	for i := range r.full {
		r.full[i].set(false, r.now)
	}
	for i := range r.devBusy {
		r.devBusy[i].set(false, r.now)
	}
	return r.now
}

// advance moves the clock, and every transfer with it.
func (r *run) advance(to float64) {
	dt := to - r.now
	for _, i := range r.moving {
		s := &r.tasks[i]
		s.remaining -= s.rate * dt
		if r.trace {
			s.work[r.limitName(s.limit)] += dt
		}
	}
	r.now = to
}

func (r *run) limitName(d int32) string {
	if d < 0 {
		return "transfer at the per-task rate"
	}
	return "transfer at " + r.c.devices[d].key
}

// settle ends every phase due now and starts what follows.
func (r *run) settle() {
	const eps = 1e-9
	var ended []int32
	for len(r.events) > 0 && r.events[0].at <= r.now+eps {
		ended = append(ended, heap.Pop(&r.events).(event).task)
	}
	kept := r.moving[:0]
	for _, i := range r.moving {
		s := &r.tasks[i]
		if s.remaining <= eps*max(1, s.rate) {
			ended = append(ended, i)
			continue
		}
		kept = append(kept, i)
	}
	if len(kept) != len(r.moving) {
		r.dirty = true
	}
	r.moving = kept
	for _, i := range ended {
		r.next(i)
	}
}

// next moves a task to its next phase, skipping empty ones.
func (r *run) next(i int32) {
	s := &r.tasks[i]
	if s.phase == phaseTransfer {
		for _, x := range r.c.path[i] {
			r.devN[x.dev]--
		}
	}
	for {
		s.phase++
		switch s.phase {
		case phaseSnapshot, phaseSetup, phaseRelease:
			d := s.cost[costIndex(s.phase)]
			if d <= 0 {
				continue
			}
			if r.trace {
				s.work[phaseNames[s.phase]] += d
			}
			s.end = r.now + d
			heap.Push(&r.events, event{s.end, i})
			return
		case phaseTransfer:
			if s.remaining <= 0 {
				continue
			}
			for _, x := range r.c.path[i] {
				r.devN[x.dev]++
			}
			r.moving = append(r.moving, i)
			r.dirty = true
			return
		case phaseDone:
			s.done = r.now
			r.left--
			r.release(i)
			return
		}
	}
}

func costIndex(phase int8) int {
	switch phase {
	case phaseSnapshot:
		return 0
	case phaseSetup:
		return 1
	}
	return 2
}

// release gives a task's slots back and starts what now fits, noting
// which pools were full: what the tasks it starts were waiting for.
func (r *run) release(i int32) {
	var wasFull []int32
	for _, p := range r.c.needs[i] {
		if r.used[p] >= r.c.pools[p].cap {
			wasFull = append(wasFull, p)
		}
		r.used[p]--
		r.full[p].set(false, r.now)
	}
	r.pump(i, wasFull)
}

// pump starts every queued task whose slots are all free, in queue
// order, skipping those that do not fit: the engine's
// dispatcher.pumpLocked. pred ended just now, freeing the pools wasFull.
func (r *run) pump(pred int32, wasFull []int32) {
	kept := r.queue[:0]
	for k, i := range r.queue {
		if r.used[globalPool] >= r.c.pools[globalPool].cap {
			kept = append(kept, r.queue[k:]...)
			break
		}
		if !r.fits(i) {
			kept = append(kept, i)
			continue
		}
		s := &r.tasks[i]
		s.start, s.pred, s.blocker = r.now, pred, blockerOf(r.c.needs[i], wasFull)
		for _, p := range r.c.needs[i] {
			r.used[p]++
			r.peak[p] = max(r.peak[p], r.used[p])
			if r.used[p] >= r.c.pools[p].cap {
				r.full[p].set(true, r.now)
			}
		}
		r.next(i)
	}
	r.queue = kept
}

func (r *run) fits(i int32) bool {
	ns := r.c.needs[i]
	for k, p := range ns {
		n := 1
		for _, q := range ns[:k] { // a pool named twice (two disks on one datastore) takes two slots
			if q == p {
				n++
			}
		}
		if r.used[p]+n > r.c.pools[p].cap {
			return false
		}
	}
	return true
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

// rates shares each device equally among the transfers crossing it; a
// transfer moves at the smallest share on its path, or the per-task rate.
func (r *run) rates() {
	r.dirty = false
	clear(r.devUse)
	taskRate := r.c.in.TaskRate
	if taskRate <= 0 {
		taskRate = math.Inf(1)
	}
	for _, i := range r.moving {
		s := &r.tasks[i]
		s.rate, s.limit = taskRate, -1
		for _, x := range r.c.path[i] {
			if share := r.c.devices[x.dev].rate / float64(r.devN[x.dev]) / x.factor; share < s.rate {
				s.rate, s.limit = share, x.dev
			}
		}
		if math.IsInf(s.rate, 1) {
			s.rate = math.MaxFloat64 // nothing limits it: it takes no time
		}
		for _, x := range r.c.path[i] {
			r.devUse[x.dev] += s.rate * x.factor
		}
	}
	for d, def := range r.c.devices {
		r.devBusy[d].set(r.devUse[d] >= def.rate*(1-1e-9), r.now)
	}
}

type event struct {
	at   float64
	task int32
}

type eventHeap []event

func (h eventHeap) Len() int           { return len(h) }
func (h eventHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h eventHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)        { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
