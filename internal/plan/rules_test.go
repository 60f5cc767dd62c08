package plan

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestRulesOfTheSeeds(t *testing.T) {
	got := CheckRules(RuleInput{
		Pools: map[string]int{
			"datastore:lab/a": 8, "datastore:lab/b": 12, "datastore:lab/c": 0,
			"group:ctrl-a": 4, "group:ctrl-b": 6,
			"repo:main": 16, "repo:big": 16, "repo:open": 0,
		},
		Peaks:         map[string]int{"datastore:lab/c": 9, "repo:open": 3},
		TargetDevices: map[string]int{"repo:big": 4},
		// 64 ÷ 4 × 0.75 = 12 VMs at most.
		VMsPerDatastore: map[string]int{"datastore:lab/a": 13, "datastore:lab/b": 12},
		Volumes:         map[string]Volume{"datastore:lab/a": {64, 4}, "datastore:lab/b": {64, 4}},
	})
	var lines []string
	for _, v := range got {
		lines = append(lines, v.String())
	}
	want := []string{
		"VMs per volume: datastore:lab/a is 13 VMs, the rule is at most 12 (queue depth 64 ÷ 4 active commands per VM, less 25%)",
		"multiplexing: repo:main is 16 streams on 1 target device(s), 16.0:1, the rule is at most 4:1",
		"snapshots per datastore: datastore:lab/b is 12, the rule is at most 8",
		"snapshots per datastore: datastore:lab/c is unlimited (9 in the predicted run), the rule is at most 8",
		"streams per controller group: group:ctrl-b is 6, the rule is at most 4",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// Points on a known curve give the curve back: λ = 10, σ = 0.1,
// κ = 0.001, whose knee is √(0.9 / 0.001) = 30.
func TestUSLFitsAKnownCurve(t *testing.T) {
	var pts []Throughput
	for _, n := range []int{1, 2, 4, 8, 16, 32, 64} {
		x := float64(n)
		pts = append(pts, Throughput{n, 10 * x / (1 + 0.1*(x-1) + 0.001*x*(x-1))})
	}
	u, err := FitUSL(pts)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(u.Lambda-10) > 1e-9 || math.Abs(u.Sigma-0.1) > 1e-9 || math.Abs(u.Kappa-0.001) > 1e-9 {
		t.Errorf("fit %+v, want λ 10 σ 0.1 κ 0.001", u)
	}
	if u.Knee() != 30 {
		t.Errorf("knee %d, want 30", u.Knee())
	}
	// Linear scaling: no contention, no knee.
	lin, err := FitUSL([]Throughput{{1, 5}, {2, 10}, {8, 40}})
	if err != nil || lin.Sigma != 0 || lin.Kappa != 0 || lin.Knee() != 0 {
		t.Errorf("linear runs: %+v %v, knee %d", lin, err, lin.Knee())
	}
}

func TestUSLRefusesTooFewRuns(t *testing.T) {
	for _, pts := range [][]Throughput{
		{{1, 5}, {2, 9}},
		{{1, 5}, {1, 5}, {2, 9}},
		{{1, 5}, {0, 5}, {2, 9}},
		{{1, 5}, {4, -1}, {2, 9}},
	} {
		if _, err := FitUSL(pts); err == nil {
			t.Errorf("%s: no error", fmt.Sprint(pts))
		}
	}
}
