package planops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/plan"
	"github.com/coffer-backup/coffer/internal/policy"
)

// Plan predicts a run of a policy and its what-ifs from the
// configuration, the inventory, the catalog's recorded runs and the
// measurements of `coffer bench` (internal/plan), changing nothing.
func (s Ops) Plan(ctx context.Context, in *api.PlanPolicyInput) (*api.Plan, error) {
	switch in.Mode {
	case "", "full", "incremental", "differential":
	default:
		return nil, service.Invalidf("mode %q: give full, incremental or differential", in.Mode)
	}
	if in.WindowSeconds < 0 || in.Runs < 0 || in.Runs > 10000 || in.Jobs < 0 || in.QueueDepth < 0 ||
		!(in.CommandsPerVM >= 0 && in.CommandsPerVM <= 1e6) {
		return nil, service.Invalidf("the window, runs (at most 10000), jobs, queue depth and commands per VM (at most 10^6) cannot be negative")
	}
	var vs []plan.Variation
	for _, w := range in.WhatIf {
		v, err := plan.ParseVariation(w)
		if err != nil {
			return nil, service.Invalidf("%v", err)
		}
		vs = append(vs, v)
	}
	cfg, _, err := s.PolicyConfig(ctx)
	if err != nil {
		return nil, err
	}
	p, ok := cfg.Policy(in.Policy)
	if !ok {
		return nil, service.Invalidf("no policy named %q (`coffer policy check` lists them)", in.Policy)
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
	cat, err := s.OpenCatalog(ctx)
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
	doc := &api.Plan{Policy: p.Name, Mode: cmp.Or(in.Mode, cmp.Or(p.Mode, "incremental")), VMs: len(sc.Targets),
		Scenarios: []api.PlanScenario{}, Measurements: notes}
	window, why := in.Window(), "given"
	if window == 0 {
		window, why = scheduleGap(p)
	}
	doc.WindowSeconds, doc.Window = window.Seconds(), why
	rep, err := plan.Make(plan.Request{Scenario: sc, Variations: vs, Measured: measured, Mode: in.Mode, Window: window, Runs: in.Runs,
		Volume: plan.Volume{QueueDepth: in.QueueDepth, CommandsPerVM: in.CommandsPerVM}, Record: record})
	if err != nil {
		return nil, service.Invalidf("%v", err)
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
