package plan

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coffer-backup/coffer/internal/procs"
)

// Prediction is a policy's predicted run.
type Prediction struct {
	VMs  int
	Runs int // Monte Carlo runs
	// P50 and P90 are the run's duration at the 50th and 90th
	// percentiles of the runs.
	P50, P90 time.Duration
	Window   time.Duration
	// InWindow is the share of the runs that ended within Window (0
	// without a window).
	InWindow float64
	// CriticalPath breaks the median run's critical path down twice:
	// by what each task on it waited for (the pool whose slot it took
	// when its predecessor ended, "none" for the first ones) and by what
	// the time went to (fixed costs, transfers by limiting device).
	CriticalPath CriticalPath
	// Bottleneck names the largest cause on the critical path.
	Bottleneck string
	// Busy lists the pools at capacity and the devices saturated in the
	// median run, busiest first.
	Busy []Busy
	// Peaks are the most slots each pool had in use (the median run).
	Peaks map[string]int
	// SimulatedP90 is the simulation's own P90, before the record
	// (record.go); Record is what the record made of the P90, nil when
	// there was too little of it, and RecordNote then says why.
	SimulatedP90 time.Duration
	Record       *RecordSpread
	RecordNote   string
}

// CriticalPath is the chain of tasks, each started by the end of the one
// before, that ends with the run's last task.
type CriticalPath struct {
	Tasks    int
	WaitedOn []Share
	Work     []Share
}

// Share is a part of the critical path.
type Share struct {
	What  string
	Share float64
}

// Busy is a resource's busy time in the median run: a pool at capacity
// or a device moving bytes at its full rate.
type Busy struct {
	Resource string
	Kind     string // "slots" or "bandwidth"
	Capacity float64
	Share    float64 // of the run
	// From and To bound its longest busy stretch, from the run's start.
	From, To time.Duration
}

// DefaultRuns is the Monte Carlo runs for a fleet: 100, and fewer above
// 2,000 VMs (at least 20), whose window varies less from run to run (a
// sum of many independent costs: its spread shrinks as the square root of
// the VMs) while each run costs more; 10,000 VMs get 20.
func DefaultRuns(vms int) int {
	if vms <= 2000 {
		return 100
	}
	return max(20, 200_000/vms)
}

// Predict simulates the run in.Runs times over the tasks' variance.
func Predict(in Input) (*Prediction, error) {
	if in.Concurrency <= 0 {
		return nil, errors.New("plan: the concurrency (limits.tasks) must be at least 1")
	}
	for _, t := range in.Tasks {
		if t.Load < 0 || t.TransferLoad < 0 || math.IsNaN(t.Load+t.TransferLoad) {
			return nil, fmt.Errorf("plan: VM %s: a negative load", t.Name)
		}
		for _, d := range []Dist{t.Snapshot, t.Setup, t.Other, t.Release, t.Bytes, t.Transfer} {
			if d.Mean < 0 || d.StdDev < 0 || math.IsNaN(d.Mean) || math.IsNaN(d.StdDev) {
				return nil, fmt.Errorf("plan: VM %s: a cost or size is negative or not a number", t.Name)
			}
		}
	}
	if g, tg := in.Growth, in.TransferGrowth; min(g.Sigma, g.Kappa, tg.Sigma, tg.Kappa, in.RunSpread, in.TransferSpread) < 0 ||
		math.IsNaN(g.Sigma+g.Kappa+tg.Sigma+tg.Kappa+in.RunSpread+in.TransferSpread) {
		return nil, errors.New("plan: a cost growth or run spread is negative or not a number")
	}
	if err := checkWorkers(&in); err != nil {
		return nil, err
	}
	c := compile(&in)
	runs := in.Runs
	if runs <= 0 {
		runs = DefaultRuns(len(in.Tasks))
	}
	if !varies(in.Tasks) && in.RunSpread <= 0 && in.TransferSpread <= 0 {
		runs = 1
	}
	times := make([]float64, runs)
	// The runs are independent: one per core at a time.
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(procs.Working(), runs) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := int(next.Add(1) - 1); k < runs; k = int(next.Add(1) - 1) {
				times[k] = newRun(c, runRNG(in.Seed, k, runs), false).simulate()
			}
		}()
	}
	wg.Wait()
	sorted := append([]float64(nil), times...)
	sort.Float64s(sorted)
	p := &Prediction{VMs: len(in.Tasks), Runs: runs, P50: seconds(percentile(sorted, 0.5)), P90: seconds(percentile(sorted, 0.9)), Window: in.Window}
	if in.Window > 0 {
		n := sort.SearchFloat64s(sorted, in.Window.Seconds()+1e-9)
		p.InWindow = float64(n) / float64(runs)
	}
	// The median run again, traced: its critical path and busy times.
	median := 0
	for k, v := range times {
		if math.Abs(v-percentile(sorted, 0.5)) < math.Abs(times[median]-percentile(sorted, 0.5)) {
			median = k
		}
	}
	r := newRun(c, runRNG(in.Seed, median, runs), true)
	r.simulate()
	p.CriticalPath = r.criticalPath()
	p.Bottleneck = bottleneck(p.CriticalPath)
	p.Busy, p.Peaks = r.busy()
	ApplyRecord(p, in.Record)
	return p, nil
}

// runRNG is run k's random source; a single run uses the means.
func runRNG(seed uint64, k, runs int) *rand.Rand {
	if runs == 1 {
		return nil
	}
	return rand.New(rand.NewPCG(seed, uint64(k)))
}

func varies(ts []Task) bool {
	for _, t := range ts {
		if t.Snapshot.StdDev > 0 || t.Setup.StdDev > 0 || t.Other.StdDev > 0 || t.Release.StdDev > 0 || t.Bytes.StdDev > 0 || t.Transfer.StdDev > 0 {
			return true
		}
	}
	return false
}

// percentile of sorted values, interpolated between neighbours.
func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	x := q * float64(len(sorted)-1)
	lo := int(math.Floor(x))
	hi := min(lo+1, len(sorted)-1)
	return sorted[lo] + (sorted[hi]-sorted[lo])*(x-float64(lo))
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }

// criticalPath walks back from the last task to end through the tasks
// whose end started each one.
func (r *run) criticalPath() CriticalPath {
	last := int32(-1)
	for i := range r.tasks {
		if last < 0 || r.tasks[i].done > r.tasks[last].done {
			last = int32(i)
		}
	}
	waited, work := map[string]float64{}, map[string]float64{}
	var cp CriticalPath
	for i := last; i >= 0; i = r.tasks[i].pred {
		s := &r.tasks[i]
		cp.Tasks++
		d := s.done - s.start
		what := "nothing (started at once)"
		if s.blocker >= 0 {
			p := r.c.pools[s.blocker]
			what = fmt.Sprintf("%s, capped at %d", p.key, p.cap)
		}
		waited[what] += d
		for k, v := range s.work {
			work[k] += v
		}
	}
	cp.WaitedOn, cp.Work = shares(waited, r.now), shares(work, r.now)
	return cp
}

func shares(m map[string]float64, total float64) []Share {
	out := make([]Share, 0, len(m))
	for k, v := range m {
		if total > 0 {
			out = append(out, Share{k, v / total})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Share != out[j].Share {
			return out[i].Share > out[j].Share
		}
		return out[i].What < out[j].What
	})
	return out
}

// bottleneck names what limits the critical path: the device its
// transfers wait on when transfers take most of its time (the pool its
// VMs queued for is then a consequence, named beside it), else the pool
// its VMs waited for most, else what its time went to.
func bottleneck(cp CriticalPath) string {
	var pool, transfer Share
	for _, s := range cp.WaitedOn {
		if s.What != "nothing (started at once)" {
			pool = s
			break
		}
	}
	for _, s := range cp.Work {
		if strings.HasPrefix(s.What, "transfer at ") {
			transfer = s
			break
		}
	}
	switch {
	case transfer.Share >= 0.5 && pool.What != "":
		return fmt.Sprintf("%s: %.0f%% of the critical path, its VMs queued for %s (%.0f%%)", transfer.What, 100*transfer.Share, pool.What, 100*pool.Share)
	case transfer.Share >= 0.5:
		return fmt.Sprintf("%s: %.0f%% of the critical path", transfer.What, 100*transfer.Share)
	case pool.What != "":
		return fmt.Sprintf("%s: on the critical path %.0f%% of the time", pool.What, 100*pool.Share)
	case len(cp.Work) > 0:
		return fmt.Sprintf("%s: %.0f%% of the critical path", cp.Work[0].What, 100*cp.Work[0].Share)
	}
	return ""
}

// busy lists the resources busy at some time, busiest first.
func (r *run) busy() ([]Busy, map[string]int) {
	var out []Busy
	peaks := map[string]int{}
	for i, p := range r.c.pools {
		peaks[p.key] = r.peak[i]
		if v := r.full[i]; v.total > 0 {
			out = append(out, Busy{p.key, "slots", float64(p.cap), v.total / r.now, seconds(v.lfrom), seconds(v.lfrom + v.longest)})
		}
	}
	for i, d := range r.c.devices {
		if v := r.devBusy[i]; v.total > 0 {
			out = append(out, Busy{d.key, "bandwidth", d.rate, v.total / r.now, seconds(v.lfrom), seconds(v.lfrom + v.longest)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Share > out[j].Share })
	return out, peaks
}
