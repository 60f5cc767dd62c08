package service

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

// Plan predicts a run of a policy and its what-ifs from the
// configuration, the inventory, the catalog's recorded runs and the
// measurements of `coffer bench` (internal/plan), changing nothing.
func (s *Service) Plan(ctx context.Context, in *api.PlanPolicyInput) (*api.Plan, error) {
	switch in.Mode {
	case "", "full", "incremental", "differential":
	default:
		return nil, invalidf("mode %q: give full, incremental or differential", in.Mode)
	}
	if in.WindowSeconds < 0 || in.Runs < 0 || in.Runs > 10000 || in.Jobs < 0 || in.QueueDepth < 0 ||
		!(in.CommandsPerVM >= 0 && in.CommandsPerVM <= 1e6) {
		return nil, invalidf("the window, runs (at most 10000), jobs, queue depth and commands per VM (at most 10^6) cannot be negative")
	}
	var vs []plan.Variation
	for _, w := range in.WhatIf {
		v, err := plan.ParseVariation(w)
		if err != nil {
			return nil, invalidf("%v", err)
		}
		vs = append(vs, v)
	}
	cfg, _, err := s.policyConfig(ctx)
	if err != nil {
		return nil, err
	}
	p, ok := cfg.Policy(in.Policy)
	if !ok {
		return nil, invalidf("no policy named %q (`coffer policy check` lists them)", in.Policy)
	}
	sc := plan.Scenario{Config: cfg, Policy: p}
	seen := inventories{}
	for _, c := range p.ConnectionNames() {
		vms, err := s.inventoryOnce(ctx, cfg, seen, c)
		if err != nil {
			return nil, fmt.Errorf("inventory of connection %s: %w", c, err)
		}
		sc.Targets = append(sc.Targets, plan.Selected(p, c, vms)...)
	}
	cat, err := s.openCatalog(ctx)
	if err != nil {
		return nil, err
	}
	defer cat.Close()
	jobs := in.Jobs
	if jobs == 0 {
		jobs = 20
	}
	if sc.History, err = plan.ReadHistory(ctx, cat, p.Name, jobs); err != nil {
		return nil, err
	}
	measured, notes, err := readMeasurements(ctx, cat)
	if err != nil {
		return nil, err
	}
	record, err := planRecord(ctx, cat, p.Name)
	if err != nil {
		return nil, err
	}
	doc := &api.Plan{Policy: p.Name, Mode: nameOr(in.Mode, nameOr(p.Mode, "incremental")), VMs: len(sc.Targets),
		Scenarios: []api.PlanScenario{}, Measurements: notes}
	window, why := in.Window(), "given"
	if window == 0 {
		window, why = scheduleGap(p)
	}
	doc.WindowSeconds, doc.Window = window.Seconds(), why
	rep, err := plan.Make(plan.Request{Scenario: sc, Variations: vs, Measured: measured, Mode: in.Mode, Window: window, Runs: in.Runs,
		Volume: plan.Volume{QueueDepth: in.QueueDepth, CommandsPerVM: in.CommandsPerVM}, Record: record})
	if err != nil {
		return nil, invalidf("%v", err)
	}
	doc.Assumptions = append([]string{}, rep.Assumptions...)
	if len(rep.Outcomes) > 0 {
		doc.P90Basis, doc.Record = p90Basis(rep.Outcomes[0].Prediction)
	}
	for _, o := range rep.Outcomes {
		doc.Scenarios = append(doc.Scenarios, scenarioDoc(o))
	}
	if c := rep.Concurrency; c != nil {
		doc.Concurrency = &api.PlanConcurrency{Lambda: c.Fit.Lambda, Sigma: c.Fit.Sigma, Kappa: c.Fit.Kappa, Configured: c.Configured,
			Recommended: c.Recommended, Warning: c.Warning, Points: []api.PlanPoint{}}
		for _, pt := range c.Points {
			doc.Concurrency.Points = append(doc.Concurrency.Points, api.PlanPoint{Concurrency: pt.Concurrency, VMsPerSecond: pt.Rate})
		}
	}
	var rf *repoForecast
	doc.Capacity, rf = s.planCapacity(ctx, cat, cfg, p, sc.Targets, sc.History, jobs, seen)
	noForecast := strings.Join(doc.Capacity.Notes, "; ")
	for i, c := range s.whatIfCapacity(ctx, cat, sc, vs, rf, noForecast) {
		if i < len(doc.Scenarios) {
			doc.Scenarios[i].Capacity = c
		}
	}
	return doc, nil
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

// predictor predicts each policy run as the engine starts it, from the
// catalog's recorded runs and measurements (engine.Options.Predict).
func predictor(cat catalog.Catalog) engine.Predictor {
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

// scheduleGap is the time between the schedule's next two runs: a run
// must end before the next begins.
func scheduleGap(p policy.Policy) (time.Duration, string) {
	sc, err := p.ParseSchedule()
	if err != nil || sc == nil {
		return 0, "none (no schedule, and none given)"
	}
	a := sc.Next(time.Now())
	b := sc.Next(a)
	if a.IsZero() || b.IsZero() {
		return 0, "none (no schedule, and none given)"
	}
	return b.Sub(a), fmt.Sprintf("the schedule's gap, from %s to %s", a.Format(time.RFC3339), b.Format(time.RFC3339))
}

// busyShown bounds the resources a plan lists: the busiest ones say why.
const busyShown = 8

func scenarioDoc(o plan.Outcome) api.PlanScenario {
	p := o.Prediction
	d := api.PlanScenario{Name: o.Name, Runs: p.Runs, P50Seconds: p.P50.Seconds(), P90Seconds: p.P90.Seconds(),
		SimulatedP90Seconds: p.SimulatedP90.Seconds(), InWindow: p.InWindow,
		Bottleneck: p.Bottleneck, CriticalPathVMs: p.CriticalPath.Tasks, WaitedOn: shareDocs(p.CriticalPath.WaitedOn),
		Work: shareDocs(p.CriticalPath.Work), Busy: []api.PlanBusy{}, Violations: []string{}}
	for i, b := range p.Busy {
		if i == busyShown {
			break
		}
		d.Busy = append(d.Busy, api.PlanBusy{Resource: b.Resource, Kind: b.Kind, Capacity: b.Capacity, Share: b.Share,
			FromSeconds: b.From.Seconds(), ToSeconds: b.To.Seconds()})
	}
	for _, v := range o.Violations {
		d.Violations = append(d.Violations, v.String())
	}
	return d
}

// p90Basis says what the configured scenario's P90 carries, and the
// record it was widened by.
func p90Basis(p *plan.Prediction) (string, *api.PlanRecord) {
	rs := p.Record
	if rs == nil {
		return p.P90Basis(), nil
	}
	return p.P90Basis(), &api.PlanRecord{Scope: rs.Scope, Runs: rs.Runs, Median: rs.Median, Empirical90: rs.Empirical90,
		Bound90: rs.Bound90, Factor: rs.Factor}
}

func shareDocs(ss []plan.Share) []api.PlanShare {
	out := []api.PlanShare{}
	for _, s := range ss {
		out = append(out, api.PlanShare{What: s.What, Share: s.Share})
	}
	return out
}
