package service

import (
	"context"
	"math"
	"sort"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/plan"
)

// PlanAccuracy sets the prediction each of a policy's last runs recorded
// as it started (its "plan" event) beside the time the run took, from its
// first VM's start to its last VM's end: the planner held to its record.
// Runs without a prediction (before the planner, or when it failed) are
// left out.
func (s *Service) PlanAccuracy(ctx context.Context, in *api.PlanAccuracyInput) (*api.PlanAccuracy, error) {
	docs, err := s.accuracies(ctx, in.Runs, in.Policy)
	if err != nil {
		return nil, err
	}
	return &docs[0], nil
}

// PlanAccuracies is PlanAccuracy for every policy of the configuration,
// each over its own last runs: the dashboard's record of the planner,
// and `coffer plan accuracy` without a policy. Policies without a
// predicted run are named apart.
func (s *Service) PlanAccuracies(ctx context.Context, in *api.PlanAccuraciesInput) (*api.PlanAccuracies, error) {
	docs, err := s.accuracies(ctx, in.Runs, "")
	if err != nil {
		return nil, err
	}
	out := &api.PlanAccuracies{Policies: []api.PlanAccuracy{}, Unpredicted: []string{}}
	for _, d := range docs {
		if len(d.Runs) == 0 {
			out.Unpredicted = append(out.Unpredicted, d.Policy)
		} else {
			out.Policies = append(out.Policies, d)
		}
	}
	return out, nil
}

// accuracies sums up the last runs of the policy named, or of every
// policy by name when only is "".
func (s *Service) accuracies(ctx context.Context, runs int, only string) ([]api.PlanAccuracy, error) {
	runs, err := accuracyRuns(runs)
	if err != nil {
		return nil, err
	}
	cfg, _, err := s.policyConfig(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	if only != "" {
		if _, ok := cfg.Policy(only); !ok {
			return nil, invalidf("no policy named %q (`coffer policy check` lists them)", only)
		}
		names = []string{only}
	} else {
		for _, p := range cfg.Policies {
			names = append(names, p.Name)
		}
		sort.Strings(names)
	}
	cat, err := s.openCatalog(ctx)
	if err != nil {
		return nil, err
	}
	defer cat.Close()
	out := make([]api.PlanAccuracy, 0, len(names))
	for _, name := range names {
		bts, err := backtests(ctx, cat, name, runs)
		if err != nil {
			return nil, err
		}
		out = append(out, *accuracyOf(name, bts))
	}
	return out, nil
}

// accuracyRuns checks the runs asked for; 0 is 20.
func accuracyRuns(runs int) (int, error) {
	if runs < 0 || runs > 1000 {
		return 0, invalidf("runs: give 0 (20) to 1000")
	}
	if runs == 0 {
		runs = 20
	}
	return runs, nil
}

// accuracyOf sums a policy's backtests up: the mean absolute error, the
// bias and the share within P90.
func accuracyOf(policyName string, bts []api.PlanBacktest) *api.PlanAccuracy {
	doc := &api.PlanAccuracy{Policy: policyName, Runs: append([]api.PlanBacktest{}, bts...)}
	within := 0
	for _, r := range doc.Runs {
		doc.MeanAbsError += math.Abs(r.Error)
		doc.Bias += r.Error
		if r.MeasuredSeconds <= r.P90Seconds {
			within++
		}
	}
	if n := float64(len(doc.Runs)); n > 0 {
		doc.MeanAbsError, doc.Bias, doc.WithinP90 = doc.MeanAbsError/n, doc.Bias/n, float64(within)/n
	}
	return doc
}

// backtests are the last runs (at most runs) of a policy, or of every
// policy when policyName is "", that recorded a prediction, newest first.
func backtests(ctx context.Context, cat catalog.Catalog, policyName string, runs int) ([]api.PlanBacktest, error) {
	jobs, err := cat.ListJobs(ctx, catalog.JobFilter{Kind: catalog.KindBackupPolicy, Policy: policyName, Limit: 4 * runs})
	if err != nil {
		return nil, err
	}
	var out []api.PlanBacktest
	for _, j := range jobs {
		if len(out) == runs {
			break
		}
		if j.Status != catalog.StatusSuccess && j.Status != catalog.StatusPartial {
			continue
		}
		b, ok, err := backtest(ctx, cat, j)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, b)
		}
	}
	return out, nil
}

// Record sizes: the policy's own last runs when there are
// plan.MinRecordRuns of them, else the catalog's, over all policies (the
// machine's drift is the same whichever policy ran).
const (
	policyRecordRuns  = 20
	catalogRecordRuns = 40
)

// planRecord is the planner's record for a policy: measured ÷ P50 of its
// last runs, or of the catalog's when the policy has too few; when both
// have too few, the larger, for the plan to say how many there were.
func planRecord(ctx context.Context, cat catalog.Catalog, policyName string) (plan.Record, error) {
	own, err := backtests(ctx, cat, policyName, policyRecordRuns)
	if err != nil {
		return plan.Record{}, err
	}
	rec := plan.Record{Scope: "policy " + policyName, Ratios: ratios(own)}
	if len(own) >= plan.MinRecordRuns {
		return rec, nil
	}
	all, err := backtests(ctx, cat, "", catalogRecordRuns)
	if err != nil {
		return plan.Record{}, err
	}
	if len(all) > len(own) {
		rec = plan.Record{Scope: "the catalog (all policies)", Ratios: ratios(all)}
	}
	return rec, nil
}

func ratios(bts []api.PlanBacktest) []float64 {
	out := make([]float64, 0, len(bts))
	for _, b := range bts {
		out = append(out, b.MeasuredSeconds/b.P50Seconds)
	}
	return out
}

// backtest reads a run's prediction and its VMs' span.
func backtest(ctx context.Context, cat catalog.Catalog, j catalog.Job) (api.PlanBacktest, bool, error) {
	evs, err := cat.ListEvents(ctx, catalog.EventFilter{JobID: j.ID})
	if err != nil {
		return api.PlanBacktest{}, false, err
	}
	b := api.PlanBacktest{JobID: j.ID, Started: j.StartedAt}
	found := false
	for _, e := range evs {
		if e.Kind == "plan" && e.Level == "info" {
			p50, _ := e.Fields["p50_seconds"].(float64)
			p90, _ := e.Fields["p90_seconds"].(float64)
			vms, _ := e.Fields["vms"].(float64)
			b.P50Seconds, b.P90Seconds, b.VMs, found = p50, p90, int(vms), p50 > 0
		}
	}
	if !found {
		return b, false, nil
	}
	tasks, err := cat.ListTasks(ctx, catalog.TaskFilter{JobID: j.ID})
	if err != nil {
		return b, false, err
	}
	var first, last time.Time
	for _, t := range tasks {
		if t.StartedAt.IsZero() || t.FinishedAt.IsZero() {
			continue
		}
		if first.IsZero() || t.StartedAt.Before(first) {
			first = t.StartedAt
		}
		if t.FinishedAt.After(last) {
			last = t.FinishedAt
		}
	}
	if first.IsZero() {
		return b, false, nil
	}
	b.MeasuredSeconds = last.Sub(first).Seconds()
	b.Error = b.MeasuredSeconds/b.P50Seconds - 1
	return b, true, nil
}
