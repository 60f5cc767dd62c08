package plan

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/coffer-backup/coffer/internal/engine"
)

// The waiting lists must start every task when the engine's dispatcher
// would: the reference below is pumpLocked as the engine writes it (scan
// the whole queue in order at every end, start what fits), over random
// fleets with pools shared in every way, VMs needing two slots of one
// datastore, and random fixed costs (real numbers: two tasks ending at
// the same instant may end in either order in the engine too, so ties
// are left out).
func TestDispatchIsTheEnginesScan(t *testing.T) {
	for seed := range uint64(30) {
		r := rand.New(rand.NewPCG(seed, 9))
		var ts []Task
		for i := range 60 + r.IntN(100) {
			ds := fmt.Sprintf("datastore:lab/ds-%d", r.IntN(6))
			pools := []engine.SlotNeed{{Key: fmt.Sprintf("host:lab/h-%d", r.IntN(4)), Cap: 1 + r.IntN(4)}, {Key: ds, Cap: 2 + r.IntN(3)}}
			if r.IntN(5) == 0 {
				pools = append(pools, engine.SlotNeed{Key: ds, Cap: 3}) // a second disk there
			}
			if r.IntN(2) == 0 {
				pools = append(pools, engine.SlotNeed{Key: "group:g", Cap: 5})
			}
			ts = append(ts, Task{Name: fmt.Sprint(i), Size: int64(r.IntN(4)), Pools: pools,
				Snapshot: Fixed(1 + 4*r.Float64()), Release: Fixed(2 * r.Float64())})
		}
		// Caps must agree across a pool's mentions, as SlotNeeds gives them.
		caps := map[string]int{}
		for _, t := range ts {
			for _, p := range t.Pools {
				if _, ok := caps[p.Key]; !ok {
					caps[p.Key] = p.Cap
				}
			}
		}
		for _, t := range ts {
			for k := range t.Pools {
				t.Pools[k].Cap = caps[t.Pools[k].Key]
			}
		}
		in := Input{Tasks: ts, Concurrency: 3 + r.IntN(10)}
		c := compile(&in)
		run := newRun(c, nil, false)
		run.simulate()
		want := referenceStarts(c)
		for i := range ts {
			if run.tasks[i].start != want[i] {
				t.Fatalf("seed %d: task %d starts at %v, the engine's scan starts it at %v", seed, i, run.tasks[i].start, want[i])
			}
		}
	}
}

// referenceStarts simulates fixed costs only with the engine's scan.
func referenceStarts(c *compiled) []float64 {
	used := make([]int, len(c.pools))
	queue := append([]int32(nil), c.order...)
	starts := make([]float64, len(c.in.Tasks))
	type end struct {
		at   float64
		task int32
	}
	var ends []end
	now := 0.0
	pump := func() {
		kept := queue[:0]
		for _, i := range queue {
			fits := true
			count := map[int32]int{}
			for _, p := range c.needs[i] {
				count[p]++
			}
			for p, n := range count {
				if used[p]+n > c.pools[p].cap {
					fits = false
				}
			}
			if !fits {
				kept = append(kept, i)
				continue
			}
			for _, p := range c.needs[i] {
				used[p]++
			}
			starts[i] = now
			t := c.in.Tasks[i]
			ends = append(ends, end{now + t.Snapshot.Mean + t.Setup.Mean + t.Release.Mean, i})
		}
		queue = kept
	}
	pump()
	for len(ends) > 0 {
		sort.SliceStable(ends, func(a, b int) bool { return ends[a].at < ends[b].at })
		e := ends[0]
		ends = ends[1:]
		now = e.at
		for _, p := range c.needs[e.task] {
			used[p]--
		}
		pump()
	}
	return starts
}
