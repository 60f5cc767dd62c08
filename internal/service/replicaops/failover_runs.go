package replicaops

import (
	"cmp"
	"context"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/replica"
	"github.com/coffer-backup/coffer/internal/service"
)

// runsScanned bounds the failover jobs read to find a plan's runs: the
// catalog filters jobs by kind, not by plan.
const runsScanned = 500

// runLogLines bounds the events read back per run (a plan of a hundred
// VMs with three probes each stays within it).
const runLogLines = 1000

// FailoverPlanRuns is plan in.Name's newest runs, read back from their
// jobs' events (jobWatcher wrote each step and probe as it ended), the
// state of its standbys, and whether the caller may start its
// operations (Sys.Failover on the plan: a face shows no action to a
// caller the API would refuse).
func (s Ops) FailoverPlanRuns(ctx context.Context, in *api.FailoverRunsInput) (*api.FailoverPlanRuns, error) {
	cfg, err := s.EngineConfig(ctx)
	if err != nil {
		return nil, err
	}
	plan, ok := cfg.FailoverPlan(in.Name)
	if !ok {
		return nil, api.Errorf(api.NotFound, "no failover plan named %q (coffer config list failover-plans)", in.Name)
	}
	object := onFailoverPlans + "/" + plan.Name
	out := &api.FailoverPlanRuns{Plan: plan.Name, Replication: plan.Replication, MayRun: auth.Allowed(s.Actor(ctx), object, auth.SysFailover),
		Standbys: []api.FailoverStandby{}, Runs: []api.FailoverRunRecord{}}
	repl, _ := cfg.Replication(plan.Replication) // validated with the plan
	if fp, err := s.resolvePlan(ctx, plan, repl, ""); err == nil && s.isVSphereDR(ctx, repl) {
		out.Standbys = s.vsphereStandbyStates(ctx, repl, fp)
	} else if err == nil {
		for gi, g := range fp.Groups {
			for _, vm := range g.VMs {
				out.Standbys = append(out.Standbys, standbyState(vm.Name, vm.Dir, gi+1))
			}
		}
	}
	jobs, err := s.ListJobs(ctx, &api.ListJobsInput{Kind: job.KindFailover}, runsScanned)
	if err != nil {
		return nil, err
	}
	limit := cmp.Or(in.Limit, 10)
	for _, j := range jobs {
		if j.Object != object || len(out.Runs) == limit {
			continue
		}
		page, err := s.JobPage(ctx, service.JobPageInput{ID: j.ID, Log: runLogLines})
		if err != nil {
			return nil, err
		}
		out.Runs = append(out.Runs, runRecord(page))
	}
	return out, nil
}

// standbyState reads whether a standby is failed over now.
func standbyState(vm, dir string, group int) api.FailoverStandby {
	sb := api.FailoverStandby{VM: vm, Group: group}
	st, err := replica.LoadState(dir)
	switch {
	case err != nil:
		sb.Unknown = err.Error()
	case st.FailedOver != nil:
		sb.FailedOver, sb.Seq, sb.Since, sb.Planned = true, st.FailedOver.Seq, st.FailedOver.At, st.FailedOver.Planned
	}
	return sb
}

// runRecord reads a run's kind, steps and probes out of its job's events.
func runRecord(j *api.Job) api.FailoverRunRecord {
	r := api.FailoverRunRecord{JobID: j.ID, Status: j.Status, User: j.User, Started: j.Started, Seconds: j.DurationSeconds, Error: j.Error,
		Steps: []api.FailoverStep{}, Probes: []api.FailoverProbe{}}
	if r.Seconds == 0 && !j.Started.IsZero() && j.Finished.IsZero() {
		r.Seconds = time.Since(j.Started).Seconds() // still running
	}
	for _, e := range j.Events {
		f := e.Fields
		switch {
		case field(f, runField) != "":
			r.Kind = field(f, runField)
		case field(f, stepField) != "":
			r.Steps = append(r.Steps, api.FailoverStep{Group: int(number(f, "group")), VM: field(f, "vm"), Name: field(f, stepField),
				Seconds: number(f, "seconds"), Error: field(f, "error"), Detail: field(f, "detail")})
		case field(f, probeField) != "":
			passed, _ := f["passed"].(bool)
			r.Probes = append(r.Probes, api.FailoverProbe{Group: int(number(f, "group")), VM: field(f, "vm"), Probe: field(f, probeField),
				Passed: passed, Evidence: field(f, "evidence"), Error: field(f, "error"), Seconds: number(f, "seconds")})
		}
	}
	return r
}

func field(f map[string]any, k string) string {
	s, _ := f[k].(string)
	return s
}

// number reads a field as the catalog gives it back (JSON: float64), or
// as it was logged (before the catalog's round trip).
func number(f map[string]any, k string) float64 {
	switch v := f[k].(type) {
	case float64:
		return v
	case int:
		return float64(v)
	case int64:
		return float64(v)
	}
	return 0
}
