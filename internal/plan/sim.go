package plan

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
)

// Phases of a task, in order.
const (
	phaseQueued = iota
	phaseSnapshot
	phaseSetup
	phaseTransfer
	phaseOther
	phaseRelease
	phaseDone
)

var phaseNames = [...]string{"queued", "snapshot create", "setup", "transfer (as recorded)", "other per-VM work", "snapshot remove", "done"}

// compiled is an Input with its pools and devices numbered, shared by
// every run of the Monte Carlo.
type compiled struct {
	in      *Input
	order   []int32 // task indices in the engine's queue order
	pos     []int32 // each task's position in it
	pools   []poolDef
	devices []deviceDef
	needs   [][]int32 // per task: pool indices (0 is the global pool), one per slot
	path    [][]crossing
	fleet   fleetOf // the workers (workers.go)
	// The run factor's deviations and degrees of freedom (runFactors).
	runSpread, transferSpread float64
	runDof                    int
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
	// scale is the device's rate per unit of factor: the read rate the
	// whole device would give this transfer.
	scale float64
}

const globalPool = 0

func compile(in *Input) *compiled {
	c := &compiled{in: in, needs: make([][]int32, len(in.Tasks)), path: make([][]crossing, len(in.Tasks))}
	c.runSpread, c.transferSpread, c.runDof = runFactors(in)
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
			if c.isPipeline(x.Device) {
				continue // each worker's own (compileWorkers)
			}
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
			c.path[i] = append(c.path[i], crossing{d, x.Factor, c.devices[d].rate / x.Factor})
		}
	}
	c.compileWorkers(pool)
	c.order = make([]int32, len(in.Tasks))
	for i := range c.order {
		c.order[i] = int32(i)
	}
	// The engine's dispatcher: longest first, then submission order.
	sort.SliceStable(c.order, func(a, b int) bool { return in.Tasks[c.order[a]].Size > in.Tasks[c.order[b]].Size })
	c.pos = make([]int32, len(c.order))
	for p, i := range c.order {
		c.pos[i] = int32(p)
	}
	return c
}

// taskState is one task during a run.
type taskState struct {
	phase     int8
	remaining float64 // bytes left to transfer, as of run.synced
	rate      float64
	tEnd      float64 // when the transfer ends at this rate
	limit     int32   // device limiting the transfer now; -1: the per-task rate
	start     float64
	done      float64
	cost      [5]float64 // sampled seconds of the fixed phases, by costIndex
	since     float64    // when its shared phase started (traced runs)
	// pred is the task whose end started this one (-1: started at 0 or
	// by another start), blocker the pool it waited for (-1: none).
	pred, blocker int32
	// work is the task's time per cause (traced runs only): phase names
	// and, for transfers, the limiting device.
	work map[string]float64
}

// run is one simulated run.
type run struct {
	c     *compiled
	rng   *rand.Rand // nil: means only
	trace bool
	now   float64
	tasks []taskState
	left  int // tasks not done
	// The dispatcher (dispatch.go): slots in use per pool, the most in
	// use, the time each was at capacity; the tasks waiting, by the pool
	// that stopped them (queue positions); those to put back after a
	// pump.
	used     []int
	peak     []int
	full     []interval
	waiting  [][]int32
	deferred []waiter
	wasFull  []int32
	freed    []int32
	// The workers (workers.go): where each task runs (-1: nowhere yet),
	// each worker's latest grant, and each task's path with its
	// worker's pipeline.
	placed    []int32
	lastGrant []int64
	grants    int64
	path      [][]crossing
	// The transfers (transfer.go).
	moving   []int32
	synced   float64   // when the transfers' bytes were last settled
	nextEnd  float64   // the first transfer's end at the current rates
	dirty    bool      // the transfers changed: rates to compute again
	devN     []int32   // transfers crossing each device
	devInv   []float64 // 1/devN: a share is a product, not a division
	devUse   []float64
	devBusy  []interval // devices saturated
	devSeen  []uint32   // epoch of the rates() that saw it crossed
	epoch    uint32
	touched  []int32
	busyDevs []int32
	events   eventHeap // ends of fixed phases that do not grow
	// Phases whose cost grows with the tasks in flight, by growth,
	// sharing the run like a processor (shared.go).
	shared [sharedClasses]sharedClass
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
	r := &run{c: c, rng: rng, trace: trace, tasks: make([]taskState, len(c.in.Tasks)), left: len(c.in.Tasks),
		used: make([]int, len(c.pools)), peak: make([]int, len(c.pools)), full: make([]interval, len(c.pools)),
		waiting: make([][]int32, len(c.pools)+len(c.fleet.sets)), nextEnd: math.Inf(1), path: c.path,
		devN: make([]int32, len(c.devices)), devInv: make([]float64, len(c.devices)), devUse: make([]float64, len(c.devices)), devBusy: make([]interval, len(c.devices)),
		devSeen: make([]uint32, len(c.devices))}
	if len(c.fleet.workers) > 0 {
		r.path = slices.Clone(c.path) // place changes a task's own
		r.placed = make([]int32, len(c.in.Tasks))
		for i := range r.placed {
			r.placed[i] = -1
		}
		r.lastGrant = make([]int64, len(c.fleet.workers))
	}
	// The run's own factor, drawn first: every task's costs move with
	// it. Its median is 1: the growth's fit is the typical run (its
	// relative residuals, and so the logs of the runs' ratios to it,
	// centre on 0), and one more run falls around it as interval.go
	// says.
	fixedFactor, transferFactor := 1.0, 1.0
	if sf, st := c.runSpread, c.transferSpread; (sf > 0 || st > 0) && rng != nil {
		z := studentDraw(rng, c.runDof)
		fixedFactor, transferFactor = math.Exp(sf*z), math.Exp(st*z)
	}
	for i, t := range c.in.Tasks {
		s := &r.tasks[i]
		s.cost = [5]float64{t.Snapshot.sample(rng), t.Setup.sample(rng), t.Transfer.sample(rng), t.Other.sample(rng), t.Release.sample(rng)}
		for k := range s.cost {
			if k == costIndex(phaseTransfer) {
				s.cost[k] *= transferFactor
			} else {
				s.cost[k] *= fixedFactor
			}
		}
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
	r.pumpAll()
	r.reshare()
	for r.left > 0 {
		if r.dirty {
			r.rates()
		}
		next := r.nextEnd
		if len(r.events) > 0 && r.events[0].at < next {
			next = r.events[0].at
		}
		for k := range r.shared {
			next = min(next, r.shared[k].nextEnd())
		}
		if math.IsInf(next, 1) {
			break // nothing runs and nothing can start: cannot happen, compile drops pools of capacity 0
		}
		r.now = next
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

// settle ends every phase due now and starts what follows.
func (r *run) settle() {
	const eps = 1e-9
	var ended []int32
	for len(r.events) > 0 && r.events[0].at <= r.now+eps {
		ended = append(ended, heap.Pop(&r.events).(event).task)
	}
	if r.nextEnd <= r.now+eps {
		r.sync()
		kept := r.moving[:0]
		for _, i := range r.moving {
			if r.tasks[i].tEnd <= r.now+eps {
				ended = append(ended, i)
				continue
			}
			kept = append(kept, i)
		}
		r.moving = kept
		r.dirty = true
	}
	ended = r.endShared(ended)
	for _, i := range ended {
		r.next(i)
	}
	// The tasks in flight changed (or not): the shared phases' rate from
	// here on, the same for all that start or go on at this instant.
	r.reshare()
}

// schedule ends task i's current phase after d seconds of its recorded
// cost. A cost that grows with concurrency is shared with the tasks in
// flight as their number changes (shared.go), from the load it was
// recorded at.
func (r *run) schedule(i int32, d float64) {
	if class, g, load := r.growth(i); g.Grows() && load > 0 {
		r.startShared(class, i, d, g, load)
		return
	}
	r.push(i, d)
}

// growth is the shared class and the growth of task i's current phase,
// and the load its cost was recorded at.
func (r *run) growth(i int32) (int, CostGrowth, float64) {
	if r.tasks[i].phase == phaseTransfer {
		return sharedTransfer, r.c.in.TransferGrowth, r.c.in.Tasks[i].TransferLoad
	}
	return sharedFixed, r.c.in.Growth, r.c.in.Tasks[i].Load
}

func (r *run) push(i int32, d float64) {
	if s := &r.tasks[i]; r.trace {
		s.work[phaseNames[s.phase]] += d
	}
	heap.Push(&r.events, event{r.now + d, i})
}

// next moves a task to its next phase, skipping empty ones.
func (r *run) next(i int32) {
	s := &r.tasks[i]
	if s.phase == phaseTransfer && s.cost[costIndex(phaseTransfer)] <= 0 { // it moved bytes at rates
		for _, x := range r.path[i] {
			r.devN[x.dev]--
			r.devInv[x.dev] = 1 / float64(r.devN[x.dev])
		}
	}
	for {
		s.phase++
		switch s.phase {
		case phaseTransfer:
			if d := s.cost[costIndex(phaseTransfer)]; d > 0 { // a recorded time, not bytes at rates
				r.schedule(i, d)
				return
			}
			if s.remaining <= 0 {
				continue
			}
			r.sync() // the others move at their old rates until now
			for _, x := range r.path[i] {
				r.devN[x.dev]++
				r.devInv[x.dev] = 1 / float64(r.devN[x.dev])
			}
			r.moving = append(r.moving, i)
			r.dirty = true
			return
		case phaseSnapshot, phaseSetup, phaseOther, phaseRelease:
			d := s.cost[costIndex(s.phase)]
			if d <= 0 {
				continue
			}
			r.schedule(i, d)
			return
		case phaseDone:
			s.done = r.now
			r.left--
			r.release(i)
			return
		}
	}
}

// costIndex is a phase's place in taskState.cost.
func costIndex(phase int8) int { return int(phase) - phaseSnapshot }

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
