package plan

import (
	"container/heap"
	"math"
)

// Recorded durations that grow with concurrency (growth.go) are shared
// like a processor: a phase's cost alone, w seconds, is work done at the
// rate 1/F(n) per second while n VM tasks are in flight, and n changes as
// tasks start and end. Fixing a phase's duration at the n of its start
// (w·F(n₀), as the model did before) ends a run of 24 VMs at once with the
// slowest of 24 draws at the 24-in-flight pace, whereas the real tasks,
// sharing the CPU, go faster as their neighbours finish: the QEMU fleet at
// 24 took 24% to 46% less than planned (docs/benchmarks-planner.md).
//
// Every phase of one growth progresses at the same rate, so the order in
// which they end does not change when n does: each growth keeps a virtual
// clock, v(t) = ∫ 1/F(n) dt, and a heap of its phases by the virtual time
// they end at, v at their start + w. A change of n only changes the
// clock's rate (O(1)); a start or an end is a heap operation. Transfers
// at measured rates share their devices instead (transfer.go).

// Shared classes: the fixed costs' growth and the recorded transfers'.
const (
	sharedFixed = iota
	sharedTransfer
	sharedClasses
)

// sharedClass is one growth's phases in progress.
type sharedClass struct {
	v, at  float64 // the virtual clock, as of real time at
	rate   float64 // 1/F(n): virtual seconds per real second
	phases sharedHeap
}

// advance moves the virtual clock to now at the current rate.
func (c *sharedClass) advance(now float64) {
	c.v += (now - c.at) * c.rate
	c.at = now
}

// nextEnd is the real time its first phase ends at the current rate.
func (c *sharedClass) nextEnd() float64 {
	if len(c.phases) == 0 {
		return math.Inf(1)
	}
	return c.at + max(c.phases[0].at-c.v, 0)/c.rate
}

// due says whether the first phase has ended by the clock, allowing for
// rounding (the end computed from the clock and the clock advanced to it
// may differ in the last bits).
func (c *sharedClass) due() bool {
	return len(c.phases) > 0 && c.phases[0].at <= c.v+1e-9*max(1, math.Abs(c.v))
}

// startShared starts task i's phase of cost d recorded at load `from`:
// its work alone, d/F(from), is done at the class's rate from now.
func (r *run) startShared(class int, i int32, d float64, g CostGrowth, from float64) {
	c := &r.shared[class]
	c.advance(r.now)
	r.tasks[i].since = r.now
	heap.Push(&c.phases, event{c.v + d/g.Factor(from), i})
}

// endShared collects the shared phases due now into ended; the clocks
// are advanced to now first.
func (r *run) endShared(ended []int32) []int32 {
	for k := range r.shared {
		c := &r.shared[k]
		c.advance(r.now)
		for c.due() {
			i := heap.Pop(&c.phases).(event).task
			if s := &r.tasks[i]; r.trace {
				s.work[phaseNames[s.phase]] += r.now - s.since
			}
			ended = append(ended, i)
		}
	}
	return ended
}

// reshare sets each class's rate for the tasks in flight now, once this
// instant's starts and ends are all done (the clocks are at now).
func (r *run) reshare() {
	n := float64(r.used[globalPool])
	growths := [sharedClasses]CostGrowth{r.c.in.Growth, r.c.in.TransferGrowth}
	for k := range r.shared {
		r.shared[k].advance(r.now)
		r.shared[k].rate = 1 / growths[k].Factor(n)
	}
}

// sharedHeap orders phases by their virtual end, then by task: the same
// order on every run of the same draws.
type sharedHeap []event

func (h sharedHeap) Len() int { return len(h) }
func (h sharedHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || (h[i].at == h[j].at && h[i].task < h[j].task)
}
func (h sharedHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *sharedHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *sharedHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
