package planops

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/measure"
	"github.com/coffer-backup/coffer/internal/plan"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
)

// The planner's inputs read from the catalog: the newest measurements and
// the record of its predictions, for the plans of this domain and for the
// prediction the engine logs as each policy run starts.

// Predictor predicts each policy run as the engine starts it, from the
// catalog's recorded runs and measurements (engine.Options.Predict): the
// composition of the table gives it to the kernel (service.Config.Predictor).
func Predictor(cat catalog.Catalog) engine.Predictor {
	return func(ctx context.Context, cfg *policy.Config, p policy.Policy, selected []engine.Selected) (engine.Prediction, error) {
		hist, err := plan.ReadHistory(ctx, cat, p.Name, 20)
		if err != nil {
			return engine.Prediction{}, err
		}
		measured, _, err := readMeasurements(ctx, cat)
		if err != nil {
			return engine.Prediction{}, err
		}
		targets := make([]plan.Target, len(selected))
		for i, t := range selected {
			targets[i] = plan.Target{Connection: t.Connection, VM: t.VM}
		}
		in, _ := plan.BuildInput(plan.Sources{Config: cfg, Policy: p, Targets: targets, History: hist, Measured: measured})
		if in.Record, err = planRecord(ctx, cat, p.Name); err != nil {
			return engine.Prediction{}, err
		}
		pred, err := plan.Predict(in)
		if err != nil {
			return engine.Prediction{}, err
		}
		return engine.Prediction{P50: pred.P50, P90: pred.P90, Bottleneck: pred.Bottleneck}, nil
	}
}

// readMeasurements reads the newest device and pipeline measurements as
// the planner uses them, with a note on each (host, date).
func readMeasurements(ctx context.Context, cat catalog.Catalog) (plan.Measurements, []string, error) {
	devices, pipeline, err := measure.Latest(ctx, cat, 500)
	if err != nil {
		return plan.Measurements{}, nil, err
	}
	measured, notes := plan.Measurements{Devices: map[string]float64{}}, []string{}
	for key, d := range devices {
		rate, what := d.DuplexRead, "read, with writes at once"
		if strings.HasPrefix(key, "repo:") {
			rate, what = d.DuplexWrite, "write, with reads at once"
		}
		measured.Devices[key] = rate
		notes = append(notes, fmt.Sprintf("%s: %.0f MB/s %s (%s on %s, %s)", key, rate/1e6, what, d.Dir, d.Host, d.At.Format(time.DateOnly)))
	}
	sort.Strings(notes)
	if pipeline != nil {
		if r, ok := pipeline.Level(repo.DefaultCompressionLevel); ok {
			measured.Pipeline = r.Rate
			notes = append(notes, fmt.Sprintf("pipeline: %.0f MB/s at zstd level %d with %d workers (on %s, %s; the repository's own level is not read)",
				r.Rate/1e6, r.Level, r.Workers, pipeline.Host, pipeline.At.Format(time.DateOnly)))
		}
	}
	return measured, notes, nil
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

// backtest reads a run's prediction and its VMs' span.
func backtest(ctx context.Context, cat catalog.Catalog, j catalog.Job) (api.PlanBacktest, bool, error) {
	evs, err := cat.ListEvents(ctx, catalog.EventFilter{JobID: j.ID, Kinds: []string{"plan"}})
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
