package plan

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// VMHistory is what a policy's recorded runs say of one VM.
type VMHistory struct {
	Runs int
	// Fixed costs, in seconds, from the snapshot-create, snapshot-remove
	// and task-done (setup_seconds) events; Other is the rest of the
	// attempt outside the snapshot, the setup and the transfer. Like
	// Transfer, they are the costs of the VM alone (one task in flight):
	// ReadHistory takes each recorded sample there by the growth fitted
	// to the runs (normalise.go), so that a Dist's deviation is not the
	// spread of the loads it was recorded at.
	Snapshot, Setup, Release, Other Dist
	// Transfer is the recorded time of reading, storing and committing
	// the disks (task-done's transfer_seconds), by mode.
	Transfer map[string]Dist
	// Bytes read per run, by mode ("full", "incremental", "differential").
	Bytes map[string]Dist
	// StoredRatio is the bytes written to the repository per byte read
	// (dedup and compression), over all its runs; 0 when nothing was read.
	StoredRatio float64
	// Logical is the disk bytes the newest run covered.
	Logical int64
	// Storage is what the VM's points add to the repository, for the
	// capacity forecast (capacity.go).
	Storage StorageHistory
}

// RunRecord is one recorded run of the policy: the most VM tasks it had
// in flight at once and what it moved, for the scalability fit.
type RunRecord struct {
	JobID            int64
	Start            time.Time
	Elapsed          time.Duration
	VMs, Concurrency int
	BytesRead        int64
	// Load is the mean over its tasks of the VM tasks in flight during
	// each task's life, and FixedSeconds the mean fixed cost per VM
	// (the attempt less its transfer), over the tasks that recorded
	// them: a point of the growth fit (growth.go). 0: not recorded.
	Load, FixedSeconds float64
	// TransferSecondsPerByte is the recorded transfer time per byte read
	// over its tasks that read bytes, at the same load: a point of the
	// per-stream growth (a transfer sharing the CPU or a link slows as
	// more run at once). 0: not recorded.
	TransferSecondsPerByte float64
}

// History is the catalog's record of a policy.
type History struct {
	VMs  map[string]*VMHistory // by VMKey
	Runs []RunRecord           // newest first
}

// VMKey names a VM across connections.
func VMKey(connection, vmID string) string { return connection + "/" + vmID }

// ReadHistory reads the last `jobs` finished runs of a policy from the
// catalog: every VM task that succeeded and the events of its fixed
// costs.
func ReadHistory(ctx context.Context, cat catalog.Catalog, policyName string, jobs int) (*History, error) {
	list, err := cat.ListJobs(ctx, catalog.JobFilter{Kind: catalog.KindBackupPolicy, Policy: policyName, Limit: 4 * jobs})
	if err != nil {
		return nil, fmt.Errorf("plan: reading the runs of policy %s: %w", policyName, err)
	}
	type samples struct {
		snapshot, setup, release []costSample
		transfer                 map[string][]costSample
		other                    []costSample
		bytes                    map[string][]float64
		read, stored             int64
		logical                  int64
		newest                   time.Time
		points                   []storedRun
	}
	per := map[string]*samples{}
	h := &History{VMs: map[string]*VMHistory{}}
	for _, j := range list {
		if len(h.Runs) == jobs {
			break
		}
		if j.Status != catalog.StatusSuccess && j.Status != catalog.StatusPartial {
			continue
		}
		tasks, err := cat.ListTasks(ctx, catalog.TaskFilter{JobID: j.ID})
		if err != nil {
			return nil, fmt.Errorf("plan: reading the tasks of job %d: %w", j.ID, err)
		}
		events, err := cat.ListEvents(ctx, catalog.EventFilter{JobID: j.ID, Kinds: costKinds})
		if err != nil {
			return nil, fmt.Errorf("plan: reading the events of job %d: %w", j.ID, err)
		}
		byTask := map[int64]*samples{}
		pointOf := map[int64]int{} // the task's entry in its samples' points
		costs := map[int64]*taskCosts{}
		modeOf := map[int64]string{}
		readOf := map[int64]int64{}
		run := RunRecord{JobID: j.ID, Start: j.StartedAt, Elapsed: j.FinishedAt.Sub(j.StartedAt)}
		var spans [][2]time.Time
		spanOf := map[int64]int{} // the task's entry in spans
		for _, t := range tasks {
			if t.Status != catalog.StatusSuccess {
				continue
			}
			key := VMKey(t.Connection, t.VMID)
			s := per[key]
			if s == nil {
				s = &samples{bytes: map[string][]float64{}, transfer: map[string][]costSample{}}
				per[key] = s
			}
			byTask[t.ID] = s
			modeOf[t.ID] = t.Mode
			readOf[t.ID] = t.BytesRead
			s.bytes[t.Mode] = append(s.bytes[t.Mode], float64(t.BytesRead))
			s.read += t.BytesRead
			s.stored += t.BytesStored
			pointOf[t.ID] = len(s.points)
			s.points = append(s.points, storedRun{at: t.FinishedAt, mode: t.Mode, read: t.BytesRead, stored: t.BytesStored,
				logical: t.BytesLogical, added: -1, zero: -1})
			if t.FinishedAt.After(s.newest) {
				s.newest, s.logical = t.FinishedAt, t.BytesLogical
			}
			run.VMs++
			run.BytesRead += t.BytesRead
			spanOf[t.ID] = len(spans)
			spans = append(spans, [2]time.Time{t.StartedAt, t.FinishedAt})
		}
		for _, e := range events {
			if byTask[e.TaskID] == nil || e.Level != "info" {
				continue // a failed operation is no measure of the cost
			}
			c := costs[e.TaskID]
			if c == nil {
				c = &taskCosts{-1, -1, -1, -1, -1, -1, -1}
				costs[e.TaskID] = c
			}
			c.add(e)
		}
		loads := taskLoads(spans)
		var fixedSum, loadSum, transferSum, transferBytes float64
		var fixedN int
		runIndex := len(h.Runs)
		for id, c := range costs {
			s := byTask[id]
			load := loads[spanOf[id]]
			if f := c.fixed(); f >= 0 && load > 0 {
				fixedSum, loadSum, fixedN = fixedSum+f, loadSum+load, fixedN+1
				if c.transfer > 0 && readOf[id] > 0 {
					transferSum, transferBytes = transferSum+c.transfer, transferBytes+float64(readOf[id])
				}
			}
			at := func(xs []costSample, v float64) []costSample {
				if v < 0 {
					return xs
				}
				return append(xs, costSample{seconds: v, load: load, run: runIndex})
			}
			s.snapshot, s.release, s.setup = at(s.snapshot, c.create), at(s.release, c.remove), at(s.setup, c.setup)
			s.points[pointOf[id]].added, s.points[pointOf[id]].zero = int64(c.added), int64(c.zero)
			s.transfer[modeOf[id]] = at(s.transfer[modeOf[id]], c.transfer)
			if c.total >= 0 && c.transfer >= 0 && c.setup >= 0 {
				s.other = at(s.other, max(c.total-max(c.create, 0)-max(c.remove, 0)-c.setup-c.transfer, 0))
			}
		}
		run.Concurrency = mostOverlapping(spans)
		if fixedN > 0 {
			run.Load, run.FixedSeconds = loadSum/float64(fixedN), fixedSum/float64(fixedN)
		}
		if transferBytes > 0 {
			run.TransferSecondsPerByte = transferSum / transferBytes
		}
		h.Runs = append(h.Runs, run)
	}
	// Each VM's costs alone (normalise.go), by the same fits BuildInput
	// scales them back with (no fit: no growth, samples as recorded).
	fixedFit, _ := h.CostGrowth()
	transferFit, _ := h.TransferGrowth()
	fixed, transfer := newNormaliser(fixedFit, h.Runs), newNormaliser(transferFit, h.Runs)
	for key, s := range per {
		v := &VMHistory{Snapshot: fixed.dist(s.snapshot), Setup: fixed.dist(s.setup), Release: fixed.dist(s.release),
			Other: fixed.dist(s.other), Transfer: map[string]Dist{}, Bytes: map[string]Dist{}, Logical: s.logical}
		for mode, ts := range s.transfer {
			if len(ts) > 0 {
				v.Transfer[mode] = transfer.dist(ts)
			}
		}
		for mode, b := range s.bytes {
			v.Bytes[mode] = distOf(b)
			v.Runs += len(b)
		}
		if s.read > 0 {
			v.StoredRatio = float64(s.stored) / float64(s.read)
		}
		v.Storage = storageOf(s.points)
		h.VMs[key] = v
	}
	return h, nil
}

// taskCosts are one task's recorded durations in seconds, and the bytes
// its point added to the repository and found zero; -1: not recorded
// (runs before coffer recorded setup and transfer times, or bytes_new
// and bytes_zero).
type taskCosts struct {
	create, remove, setup, transfer, total float64
	added, zero                            float64
}

// fixed is the task's fixed cost in seconds: the attempt less its
// transfer, else the sum of the fixed phases recorded; -1: none.
func (c *taskCosts) fixed() float64 {
	if c.total >= 0 && c.transfer >= 0 {
		return max(c.total-c.transfer, 0)
	}
	if c.create < 0 && c.remove < 0 && c.setup < 0 {
		return -1
	}
	return max(c.create, 0) + max(c.remove, 0) + max(c.setup, 0)
}

// costKinds are the kinds of event a task's costs are read from (add):
// a run's other lines are not read.
var costKinds = []string{"snapshot-create", "snapshot-remove", "task-done"}

func (c *taskCosts) add(e catalog.Event) {
	switch e.Kind {
	case "snapshot-create":
		c.create = field(e.Fields, "seconds")
	case "snapshot-remove":
		c.remove = field(e.Fields, "seconds")
	case "task-done":
		c.total, c.setup, c.transfer = field(e.Fields, "seconds"), field(e.Fields, "setup_seconds"), field(e.Fields, "transfer_seconds")
		c.added, c.zero = field(e.Fields, "bytes_new"), field(e.Fields, "bytes_zero")
	}
}

// field is a recorded number: float64 as read back from JSON, an
// integer as a catalog kept in memory holds it.
func field(fields map[string]any, name string) float64 {
	var v float64
	switch x := fields[name].(type) {
	case float64:
		v = x
	case int64:
		v = float64(x)
	case int:
		v = float64(x)
	default:
		return -1
	}
	if v >= 0 && !math.IsNaN(v) {
		return v
	}
	return -1
}

// distOf is the mean and the sample standard deviation; no samples give
// the zero Dist (unknown).
func distOf(xs []float64) Dist {
	if len(xs) == 0 {
		return Dist{}
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	d := Dist{Mean: sum / float64(len(xs))}
	if len(xs) > 1 {
		var ss float64
		for _, x := range xs {
			ss += (x - d.Mean) * (x - d.Mean)
		}
		d.StdDev = math.Sqrt(ss / float64(len(xs)-1))
	}
	return d
}

// spanEdge is where a span opens (+1) or closes (-1).
type spanEdge struct {
	at    time.Time
	delta int
}

// spanEdges are the opening and closing instants of the spans that have
// both, in time order, a span closing before another opens at the same
// instant.
func spanEdges(spans [][2]time.Time) []spanEdge {
	var es []spanEdge
	for _, s := range spans {
		if s[0].IsZero() || s[1].Before(s[0]) {
			continue
		}
		es = append(es, spanEdge{s[0], 1}, spanEdge{s[1], -1})
	}
	sort.Slice(es, func(i, j int) bool {
		if !es[i].at.Equal(es[j].at) {
			return es[i].at.Before(es[j].at)
		}
		return es[i].delta < es[j].delta
	})
	return es
}

// mostOverlapping is the most spans open at one instant (a span ends
// before another starting at the same time).
func mostOverlapping(spans [][2]time.Time) int {
	es := spanEdges(spans)
	n, most := 0, 0
	for _, e := range es {
		n += e.delta
		most = max(most, n)
	}
	return most
}

// taskLoads is, for each span, the mean number of spans open over it
// (itself included): the concurrency that task ran at. A span of no
// length takes the number open at its instant.
func taskLoads(spans [][2]time.Time) []float64 {
	out := make([]float64, len(spans))
	es := spanEdges(spans)
	if len(es) == 0 {
		return out
	}
	// The count of open spans is constant between distinct edge instants:
	// at[k] is the k-th instant, open[k] the count after its edges,
	// area[k] the integral of the count up to at[k], in seconds.
	origin := es[0].at
	var at, area []float64
	var open []int
	n := 0
	for _, e := range es {
		x := e.at.Sub(origin).Seconds()
		if len(at) == 0 || x > at[len(at)-1] {
			a := 0.0
			if k := len(at) - 1; k >= 0 {
				a = area[k] + float64(open[k])*(x-at[k])
			}
			at, area, open = append(at, x), append(area, a), append(open, n)
		}
		n += e.delta
		open[len(open)-1] = n
	}
	integral := func(x float64) (float64, int) {
		k := sort.SearchFloat64s(at, x+1e-12) - 1
		return area[k] + float64(open[k])*(x-at[k]), open[k]
	}
	for i, s := range spans {
		if s[0].IsZero() || s[1].Before(s[0]) {
			continue
		}
		from, to := s[0].Sub(origin).Seconds(), s[1].Sub(origin).Seconds()
		a, openAt := integral(from)
		if to <= from {
			out[i] = float64(max(openAt, 1))
			continue
		}
		b, _ := integral(to)
		out[i] = (b - a) / (to - from)
	}
	return out
}

// CostGrowth fits the growth of the fixed costs with concurrency to the
// recorded runs (growth.go); an error when none recorded fixed costs.
func (h *History) CostGrowth() (CostGrowth, error) {
	var pts []CostPoint
	for _, r := range h.Runs {
		pts = append(pts, CostPoint{r.Load, r.FixedSeconds})
	}
	return FitCostGrowth(pts)
}

// TransferGrowth fits the growth of a recorded transfer's time per byte
// with concurrency, the same way; an error when no run recorded one.
func (h *History) TransferGrowth() (CostGrowth, error) {
	var pts []CostPoint
	for _, r := range h.Runs {
		pts = append(pts, CostPoint{r.Load, r.TransferSecondsPerByte})
	}
	return FitCostGrowth(pts)
}
