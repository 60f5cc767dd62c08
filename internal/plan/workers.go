package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/coffer-backup/coffer/internal/engine"
)

// Workers in the simulation, as in the engine's dispatcher
// (internal/engine/placement.go): each worker is a pool "worker:<name>"
// of its slots, a task runs only on a worker whose reach covers its route
// (engine.RouteOf), and it takes, with its other slots, one of the least
// busy eligible worker with a free slot (slots in use relative to its
// slots, then the one granted least recently, then by name). Each worker
// moves its transfers through a pipeline of its own, "pipeline:<name>",
// at the rate of PipelineDevice (each worker as fast as the machine
// measured): that, and its slots, is what more workers add.
//
// A task that no worker with a free slot can run waits in the list of its
// set of eligible workers, which the end of a task on any of them looks
// at, as a pool's list is looked at when the pool frees.

type workerDef struct {
	name string
	pool int32 // its slots' pool
	dev  int32 // its pipeline device; -1: the pipeline is not a limit
}

// fleetOf is the compiled workers: their pools and pipelines, and each
// task's set of eligible workers.
type fleetOf struct {
	workers []workerDef
	sets    [][]int32 // eligible workers (indices into workers) of each distinct set
	setOf   []int32   // per task: its set; -1 with no workers
	inSets  [][]int32 // per worker: the sets it belongs to
	// pipeFactor is each task's pipeline crossing's factor, moved at
	// start to the chosen worker's pipeline (0: the task crosses none).
	pipeFactor []float64
}

// checkWorkers refuses workers the engine would refuse and tasks no
// worker can run (the engine would leave them waiting for ever).
func checkWorkers(in *Input) error {
	seen := map[string]bool{}
	for _, w := range in.Workers {
		if w.Name == "" || seen[w.Name] || w.Slots < 1 {
			return fmt.Errorf("plan: worker %q: a worker needs a name of its own and at least 1 slot", w.Name)
		}
		seen[w.Name] = true
	}
	if len(in.Workers) == 0 {
		return nil
	}
	for _, t := range in.Tasks {
		if why := engine.Unreached(in.Workers, t.Route); why != "" {
			return fmt.Errorf("plan: VM %s would wait for ever: %s", t.Name, why)
		}
	}
	return nil
}

// compileWorkers adds the workers' pools and pipelines; path is the
// tasks' paths as compiled, from which each pipeline crossing is taken
// out (it moves to the placed worker's pipeline).
func (c *compiled) compileWorkers(pool func(string, int) int32) {
	in := c.in
	f := &c.fleet
	f.setOf = make([]int32, len(in.Tasks))
	for i := range f.setOf {
		f.setOf[i] = -1
	}
	if len(in.Workers) == 0 {
		return
	}
	rate := in.Devices[PipelineDevice]
	for _, w := range in.Workers {
		d := int32(-1)
		if rate > 0 {
			d = int32(len(c.devices))
			c.devices = append(c.devices, deviceDef{"pipeline:" + w.Name, rate})
		}
		f.workers = append(f.workers, workerDef{w.Name, pool("worker:"+w.Name, w.Slots), d})
	}
	f.inSets = make([][]int32, len(f.workers))
	f.pipeFactor = make([]float64, len(in.Tasks))
	setIdx := map[string]int32{}
	for i, t := range in.Tasks {
		var set []int32
		var key strings.Builder
		for k, w := range in.Workers {
			if w.Covers(t.Route) {
				set = append(set, int32(k))
				fmt.Fprintf(&key, "%d,", k)
			}
		}
		s, ok := setIdx[key.String()]
		if !ok {
			s = int32(len(f.sets))
			setIdx[key.String()] = s
			f.sets = append(f.sets, set)
			for _, w := range set {
				f.inSets[w] = append(f.inSets[w], s)
			}
		}
		f.setOf[i] = s
		for _, x := range t.Path {
			if x.Device == PipelineDevice && x.Factor > 0 {
				f.pipeFactor[i] += x.Factor
			}
		}
	}
}

// isPipeline reports whether a crossing is the shared pipeline, which
// workers replace with their own.
func (c *compiled) isPipeline(device string) bool {
	return len(c.in.Workers) > 0 && device == PipelineDevice
}

// pickWorker is the least busy worker of set s with a free slot, -1 when
// none has one.
func (r *run) pickWorker(s int32) int32 {
	best := int32(-1)
	for _, w := range r.c.fleet.sets[s] {
		p := r.c.fleet.workers[w].pool
		if r.used[p] >= r.c.pools[p].cap {
			continue
		}
		if best < 0 || r.lessBusy(w, best) {
			best = w
		}
	}
	return best
}

func (r *run) lessBusy(a, b int32) bool {
	pa, pb := r.c.fleet.workers[a].pool, r.c.fleet.workers[b].pool
	if x, y := r.used[pa]*r.c.pools[pb].cap, r.used[pb]*r.c.pools[pa].cap; x != y {
		return x < y
	}
	return r.lastGrant[a] < r.lastGrant[b]
}

// place puts task i on worker w: its slot, and its transfer through the
// worker's pipeline. It returns the pools the task now holds.
func (r *run) place(i, w int32) []int32 {
	f := &r.c.fleet
	r.placed[i] = w
	r.grants++
	r.lastGrant[w] = r.grants
	if d := f.workers[w].dev; d >= 0 && f.pipeFactor[i] > 0 {
		base := r.c.path[i]
		x := f.pipeFactor[i]
		r.path[i] = append(base[:len(base):len(base)], crossing{d, x, r.c.devices[d].rate / x})
	}
	return r.heldBy(i)
}

// heldBy is the pools task i holds: its needs, and its worker's.
func (r *run) heldBy(i int32) []int32 {
	ns := r.c.needs[i]
	if r.placed == nil || r.placed[i] < 0 {
		return ns
	}
	return append(ns[:len(ns):len(ns)], r.c.fleet.workers[r.placed[i]].pool)
}

// setList is the waiting list of set s: after the pools' lists.
func (r *run) setList(s int32) int32 { return int32(len(r.c.pools)) + s }

// blocked reports whether waiting list p cannot start anything now: its
// pool is full, or no worker of its set has a free slot.
func (r *run) blocked(p int32) bool {
	if int(p) < len(r.c.pools) {
		return r.used[p] >= r.c.pools[p].cap
	}
	return r.pickWorker(p-int32(len(r.c.pools))) < 0
}

// workerLists adds to freed the waiting lists of the sets of the worker
// task i ran on.
func (r *run) workerLists(i int32, freed []int32) []int32 {
	if r.placed == nil || r.placed[i] < 0 {
		return freed
	}
	for _, s := range r.c.fleet.inSets[r.placed[i]] {
		if l := r.setList(s); len(r.waiting[l]) > 0 && !slices.Contains(freed, l) {
			freed = append(freed, l)
		}
	}
	return freed
}
