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
	// and task-done (setup_seconds) events.
	Snapshot, Setup, Release Dist
	// Bytes read per run, by mode ("full", "incremental", "differential").
	Bytes map[string]Dist
	// StoredRatio is the bytes written to the repository per byte read
	// (dedup and compression), over all its runs; 0 when nothing was read.
	StoredRatio float64
	// Logical is the disk bytes the newest run covered.
	Logical int64
}

// RunRecord is one recorded run of the policy: the most VM tasks it had
// in flight at once and what it moved, for the scalability fit.
type RunRecord struct {
	JobID            int64
	Start            time.Time
	Elapsed          time.Duration
	VMs, Concurrency int
	BytesRead        int64
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
		snapshot, setup, release []float64
		bytes                    map[string][]float64
		read, stored             int64
		logical                  int64
		newest                   time.Time
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
		events, err := cat.ListEvents(ctx, catalog.EventFilter{JobID: j.ID})
		if err != nil {
			return nil, fmt.Errorf("plan: reading the events of job %d: %w", j.ID, err)
		}
		byTask := map[int64]*samples{}
		run := RunRecord{JobID: j.ID, Start: j.StartedAt, Elapsed: j.FinishedAt.Sub(j.StartedAt)}
		var spans [][2]time.Time
		for _, t := range tasks {
			if t.Status != catalog.StatusSuccess {
				continue
			}
			key := VMKey(t.Connection, t.VMID)
			s := per[key]
			if s == nil {
				s = &samples{bytes: map[string][]float64{}}
				per[key] = s
			}
			byTask[t.ID] = s
			s.bytes[t.Mode] = append(s.bytes[t.Mode], float64(t.BytesRead))
			s.read += t.BytesRead
			s.stored += t.BytesStored
			if t.FinishedAt.After(s.newest) {
				s.newest, s.logical = t.FinishedAt, t.BytesLogical
			}
			run.VMs++
			run.BytesRead += t.BytesRead
			spans = append(spans, [2]time.Time{t.StartedAt, t.FinishedAt})
		}
		for _, e := range events {
			s := byTask[e.TaskID]
			if s == nil || e.Level != "info" {
				continue // a failed operation is no measure of the cost
			}
			switch e.Kind {
			case "snapshot-create":
				s.snapshot = appendField(s.snapshot, e.Fields, "seconds")
			case "snapshot-remove":
				s.release = appendField(s.release, e.Fields, "seconds")
			case "task-done":
				s.setup = appendField(s.setup, e.Fields, "setup_seconds")
			}
		}
		run.Concurrency = mostOverlapping(spans)
		h.Runs = append(h.Runs, run)
	}
	for key, s := range per {
		v := &VMHistory{Snapshot: distOf(s.snapshot), Setup: distOf(s.setup), Release: distOf(s.release),
			Bytes: map[string]Dist{}, Logical: s.logical}
		for mode, b := range s.bytes {
			v.Bytes[mode] = distOf(b)
			v.Runs += len(b)
		}
		if s.read > 0 {
			v.StoredRatio = float64(s.stored) / float64(s.read)
		}
		h.VMs[key] = v
	}
	return h, nil
}

func appendField(xs []float64, fields map[string]any, name string) []float64 {
	if v, ok := fields[name].(float64); ok && v >= 0 && !math.IsNaN(v) {
		return append(xs, v)
	}
	return xs
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

// mostOverlapping is the most spans open at one instant (a span ends
// before another starting at the same time).
func mostOverlapping(spans [][2]time.Time) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var es []edge
	for _, s := range spans {
		if s[0].IsZero() || s[1].Before(s[0]) {
			continue
		}
		es = append(es, edge{s[0], 1}, edge{s[1], -1})
	}
	sort.Slice(es, func(i, j int) bool {
		if !es[i].at.Equal(es[j].at) {
			return es[i].at.Before(es[j].at)
		}
		return es[i].delta < es[j].delta
	})
	n, most := 0, 0
	for _, e := range es {
		n += e.delta
		most = max(most, n)
	}
	return most
}
