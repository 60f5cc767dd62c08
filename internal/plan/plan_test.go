package plan

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
)

// sixteen VMs, eight on each of two datastores, each recorded with a
// 1 s snapshot, 1 s setup, 2 s release and nothing to read: 4 s a VM.
func sixteen() Scenario {
	h := &History{VMs: map[string]*VMHistory{}}
	var ts []Target
	for i := range 16 {
		id := fmt.Sprintf("vm-%02d", i)
		ds := fmt.Sprintf("ds-%d", i%2)
		ts = append(ts, Target{"lab", hypervisor.VM{VMRef: hypervisor.VMRef{ID: id, Name: id}, Host: "h1", Datastores: []string{ds},
			Disks: []hypervisor.DiskInfo{{Size: 1e9, Datastore: ds}}}})
		h.VMs[VMKey("lab", id)] = &VMHistory{Runs: 1, Snapshot: Fixed(1), Setup: Fixed(1), Release: Fixed(2),
			Bytes: map[string]Dist{"incremental": Fixed(0)}, StoredRatio: 0.5}
	}
	cfg := &policy.Config{Limits: policy.Limits{Tasks: 4}, Repositories: []policy.Repository{{Name: "main"}},
		ResourceGroups: []policy.ResourceGroup{{Name: "ctrl", Datastores: []string{"ds-*"}, Limit: 16}}}
	return Scenario{Config: cfg, Policy: policy.Policy{Name: "nightly", Repository: "main", Mode: "incremental"}, Targets: ts, History: h}
}

func TestWhatIfsSideBySide(t *testing.T) {
	var vs []Variation
	for _, s := range []string{"tasks=8", "tasks=16", "per-datastore=2", "add-vms=16", "streams=2", "group:ctrl=4", "move=vm-0*:ds-1"} {
		v, err := ParseVariation(s)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	sc := sixteen()
	rep, err := Make(Request{Scenario: sc, Variations: vs, Measured: Measurements{Pipeline: 1e9}})
	if err != nil {
		t.Fatal(err)
	}
	// 4 s a VM: 16 VMs 4 at a time is 4 waves.
	want := map[string]time.Duration{
		"as configured":   16 * time.Second,
		"tasks=8":         8 * time.Second,
		"tasks=16":        4 * time.Second,  // 8 per datastore, both at once
		"per-datastore=2": 16 * time.Second, // 4 tasks: 2 per datastore, still 4 at a time
		"add-vms=16":      32 * time.Second,
		"streams=2":       32 * time.Second,
		"group:ctrl=4":    16 * time.Second,
		// vm-00 to vm-09 on ds-1 (with the odd ones there already): 13 VMs
		// on ds-1, 3 on ds-0; 4 at a time is still 4 waves.
		"move=vm-0*:ds-1": 16 * time.Second,
	}
	if len(rep.Outcomes) != len(want) {
		t.Fatalf("%d outcomes", len(rep.Outcomes))
	}
	for _, o := range rep.Outcomes {
		if o.Prediction.P50 != want[o.Name] {
			t.Errorf("%s: P50 %s, want %s", o.Name, o.Prediction.P50, want[o.Name])
		}
	}
	// The configured group of 16 streams breaks the controller rule; the
	// what-if that lowers it to 4 does not.
	if !hasRule(rep.Outcomes[0].Violations, "streams per controller group") || hasRule(rep.Outcomes[6].Violations, "streams per controller group") {
		t.Errorf("violations: as configured %v, group:ctrl=4 %v", rep.Outcomes[0].Violations, rep.Outcomes[6].Violations)
	}
	// The scenario itself is unchanged by its variations.
	if sc.Config.Limits.Tasks != 4 || len(sc.Targets) != 16 || sc.Config.Repositories[0].Streams != 0 || sc.Targets[0].VM.Datastores[0] != "ds-0" {
		t.Errorf("the scenario was changed: %+v", sc.Config)
	}
}

func hasRule(vs []Violation, rule string) bool {
	for _, v := range vs {
		if v.Rule == rule {
			return true
		}
	}
	return false
}

func TestWhatIfsRefused(t *testing.T) {
	for s, want := range map[string]string{
		"tasks":        "KEY=VALUE",
		"tasks=0":      "whole number",
		"tasks=x":      "whole number",
		"speed=3":      "unknown key",
		"move=web":     "GLOB:DATASTORE",
		"move=[:ds":    "GLOB:DATASTORE",
		"group:=3":     "unknown key",
		"streams=+1.5": "whole number",
	} {
		if _, err := ParseVariation(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", s, err, want)
		}
	}
	sc := sixteen()
	for s, want := range map[string]string{
		"group:nope=3":  "no resource group",
		"streams=+1":    "unlimited write streams",
		"move=db-*:ds9": "no selected VM",
	} {
		v, err := ParseVariation(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Apply(sc); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", s, err, want)
		}
	}
	sc.Config.Repositories[0].Streams = 4
	v, _ := ParseVariation("streams=+1")
	got, err := v.Apply(sc)
	if err != nil || got.Config.Repositories[0].Streams != 5 {
		t.Errorf("streams=+1 on 4: %v %+v", err, got.Config.Repositories)
	}
}

// Runs recorded on a known curve (λ 0.5 VM/s, σ 0.05, κ 0.002: knee
// √(0.95/0.002) ≈ 21.8) recommend 22, and warn at 32.
func TestRecommendedConcurrency(t *testing.T) {
	var runs []RunRecord
	for _, n := range []int{1, 2, 4, 8, 16} {
		x := float64(n)
		rate := 0.5 * x / (1 + 0.05*(x-1) + 0.002*x*(x-1))
		runs = append(runs, RunRecord{VMs: 1000, Concurrency: n, Elapsed: time.Duration(1000 / rate * float64(time.Second))})
	}
	rec := Recommend(runs, 32)
	if rec == nil || rec.Recommended != 22 || !strings.Contains(rec.Warning, "past the knee at 22") {
		t.Fatalf("%+v", rec)
	}
	if rec := Recommend(runs, 16); rec.Warning != "" {
		t.Errorf("16 below the knee: %q", rec.Warning)
	}
	if rec := Recommend(runs[:2], 32); rec != nil {
		t.Errorf("two concurrencies gave %+v", rec)
	}
}
