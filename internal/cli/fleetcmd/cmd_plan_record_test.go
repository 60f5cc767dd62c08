package fleetcmd_test

import (
	"encoding/json"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
)

const planRecordConfig = planConfig + `
  - name: other
    connection: lab
`

// The P90 held to the planner's record: with fewer than five runs that
// recorded a prediction it carries only the costs' spread and says so;
// with five, it is widened by their measured ÷ P50, read back here from
// `coffer plan accuracy`; a policy without runs of its own takes the
// catalog's.
func TestPlanP90FromTheRecord(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	e.Config(planRecordConfig)
	plan := func(policy string) api.Plan {
		t.Helper()
		var p api.Plan
		if err := json.Unmarshal([]byte(e.Must("plan", policy, "--json")), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for range 4 {
		e.Must("run", "all")
	}
	if p := plan("all"); p.Record != nil || !strings.Contains(p.P90Basis, "carries only the spread of the recorded task costs (4 runs recorded with a prediction in policy all, fewer than 5)") ||
		p.Scenarios[0].P90Seconds != p.Scenarios[0].SimulatedP90Seconds {
		t.Fatalf("with 4 runs: record %+v, basis %q, P90 %v, simulated %v", p.Record, p.P90Basis, p.Scenarios[0].P90Seconds, p.Scenarios[0].SimulatedP90Seconds)
	}
	e.Must("run", "all")
	var acc api.PlanAccuracy
	if err := json.Unmarshal([]byte(e.Must("plan", "accuracy", "all", "--json")), &acc); err != nil {
		t.Fatal(err)
	}
	if len(acc.Runs) != 5 {
		t.Fatalf("accuracy: %d runs, want 5", len(acc.Runs))
	}
	var ratios []float64
	for _, r := range acc.Runs {
		ratios = append(ratios, r.MeasuredSeconds/r.P50Seconds)
	}
	sort.Float64s(ratios)
	p := plan("all")
	rec, s := p.Record, p.Scenarios[0]
	if rec == nil || rec.Scope != "policy all" || rec.Runs != 5 || math.Abs(rec.Median-ratios[2]) > 1e-9 ||
		math.Abs(rec.Empirical90-(ratios[3]+0.6*(ratios[4]-ratios[3]))) > 1e-9 || rec.Factor != math.Max(rec.Empirical90, rec.Bound90) {
		t.Fatalf("record %+v, the accuracy's ratios %v", rec, ratios)
	}
	if want := math.Max(s.SimulatedP90Seconds, s.P50Seconds*rec.Factor); math.Abs(s.P90Seconds-want) > 1e-3 {
		t.Errorf("P90 %v, want the larger of the simulation's %v and P50 %v × %v", s.P90Seconds, s.SimulatedP90Seconds, s.P50Seconds, rec.Factor)
	}
	if !strings.Contains(p.P90Basis, "5 runs of policy all took") {
		t.Errorf("basis %q", p.P90Basis)
	}
	if text := e.Must("plan", "all"); !strings.Contains(text, "5 runs of policy all took") {
		t.Errorf("plan output lacks the P90's basis:\n%s", text)
	}
	// Another policy, never run: the catalog's five.
	if o := plan("other"); o.Record == nil || o.Record.Scope != "the catalog (all policies)" || o.Record.Runs != 5 || o.Record.Factor != rec.Factor {
		t.Errorf("policy other: record %+v, basis %q", o.Record, o.P90Basis)
	}
	// The run's own prediction, as it starts, is held to the same record:
	// the sixth run recorded the P90 the plan gave before it.
	e.Must("run", "all")
	if err := json.Unmarshal([]byte(e.Must("plan", "accuracy", "all", "--json")), &acc); err != nil {
		t.Fatal(err)
	}
	if got := acc.Runs[0]; len(acc.Runs) != 6 || math.Abs(got.P90Seconds-s.P90Seconds) > 1e-3 || math.Abs(got.P50Seconds-s.P50Seconds) > 1e-3 {
		t.Errorf("the sixth run recorded P50 %v and P90 %v; the plan before it gave %v and %v", got.P50Seconds, got.P90Seconds, s.P50Seconds, s.P90Seconds)
	}
	// Without a policy: every policy's sums (the dashboard's), the policy
	// never run named apart.
	var every api.PlanAccuracies
	if err := json.Unmarshal([]byte(e.Must("plan", "accuracy", "--json")), &every); err != nil {
		t.Fatal(err)
	}
	if len(every.Policies) != 1 || every.Policies[0].Policy != "all" || len(every.Policies[0].Runs) != 6 ||
		every.Policies[0].Bias != acc.Bias || every.Policies[0].WithinP90 != acc.WithinP90 || strings.Join(every.Unpredicted, ",") != "other" {
		t.Errorf("every policy's accuracy: %+v; policy all's: %+v", every, acc)
	}
	if out := e.Must("plan", "accuracy"); !strings.Contains(out, "WITHIN P90") || !strings.Contains(out, "no run with a prediction yet: other") {
		t.Errorf("plan accuracy without a policy:\n%s", out)
	}
}

// Without any policy, `coffer plan accuracy` says there is nothing to
// judge instead of printing nothing.
func TestPlanAccuracyWithoutPolicies(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	if out := e.Must("plan", "accuracy"); !strings.Contains(out, "no policy is configured") {
		t.Errorf("plan accuracy without policies:\n%s", out)
	}
}
