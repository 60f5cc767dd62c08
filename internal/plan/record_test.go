package plan

import (
	"math"
	"strings"
	"testing"
	"time"
)

// Five runs that took 1.0, 1.1, 1.2, 1.3 and 1.4 times their P50. By
// hand: the logs' mean m = ln(2.1840)/5 = 0.175294, their deviation
// s = 0.132980 (n−1 in the denominator), the scale of one more run
// s·sqrt(1+1/5) = 0.145672; t₀.₉ at 4 degrees of freedom is 1.533206, so
// the bound is exp(0.175294 + 1.533206 × 0.145672) = exp(0.398639) =
// 1.48980. The 90th percentile of the five, interpolated at rank
// 0.9 × 4 = 3.6, is 1.3 + 0.6 × 0.1 = 1.36; the median 1.2.
var fiveRuns = Record{Scope: "policy nightly", Ratios: []float64{1.0, 1.1, 1.2, 1.3, 1.4}}

func TestRecordSpreadByHand(t *testing.T) {
	rs, ok := fiveRuns.Spread()
	if !ok {
		t.Fatal("five runs were not enough")
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"median", rs.Median, 1.2}, {"90th percentile", rs.Empirical90, 1.36}, {"t bound", rs.Bound90, 1.48980}, {"factor", rs.Factor, 1.48980}} {
		if math.Abs(c.got-c.want) > 5e-5 {
			t.Errorf("%s %.5f, want %.5f", c.name, c.got, c.want)
		}
	}
	if rs.Runs != 5 || rs.Scope != "policy nightly" {
		t.Errorf("runs %d of %q", rs.Runs, rs.Scope)
	}
}

// The P90 is the larger of the simulation's and P50 × the record's
// factor; with fewer than MinRecordRuns it stays the simulation's, and
// the basis says that it carries only the task costs' spread.
func TestApplyRecordWidensOrKeeps(t *testing.T) {
	for _, c := range []struct {
		name    string
		simP90  time.Duration
		rec     Record
		wantP90 time.Duration
		basis   string
	}{
		{"the record is wider", 110 * time.Second, fiveRuns, 148980 * time.Millisecond, "is the record's: 5 runs of policy nightly"},
		{"the simulation is wider", 160 * time.Second, fiveRuns, 160 * time.Second, "the simulation's, wider than the record's"},
		{"too few runs", 110 * time.Second, Record{Scope: "policy nightly", Ratios: []float64{1.5, 1.6, 1.7, 1.8}}, 110 * time.Second,
			"carries only the spread of the recorded task costs (4 runs recorded with a prediction in policy nightly, fewer than 5)"},
		{"unusable ratios are not runs", 110 * time.Second, Record{Scope: "x", Ratios: []float64{1, 1.1, 1.2, 0, math.NaN()}}, 110 * time.Second, "3 runs recorded"},
		{"no record", 110 * time.Second, Record{}, 110 * time.Second, "no run recorded with its prediction"},
	} {
		p := &Prediction{P50: 100 * time.Second, P90: c.simP90}
		ApplyRecord(p, c.rec)
		if !sameToTheMillisecond(p.P90, c.wantP90) {
			t.Errorf("%s: P90 %s, want %s", c.name, p.P90, c.wantP90)
		}
		if p.SimulatedP90 != c.simP90 || p.P50 != 100*time.Second {
			t.Errorf("%s: simulated P90 %s, P50 %s: changed", c.name, p.SimulatedP90, p.P50)
		}
		if b := p.P90Basis(); !strings.Contains(b, c.basis) {
			t.Errorf("%s: basis %q, want it to say %q", c.name, b, c.basis)
		}
	}
}

// The chance to end within the window is the smaller of the
// simulation's and the record's. Ratios e^−0.1, e^−0.05, 1, e^0.05, e^0.1
// have logs of mean 0: a window of exactly the P50 is an even chance by
// the record, whatever the simulation said; the record holds it to 0.5.
// A window of the P50 × e^(t₀.₉·scale) is 90%: scale = sqrt(0.025/4) ×
// sqrt(1.2) = 0.0866025.
func TestApplyRecordChanceInWindow(t *testing.T) {
	rec := Record{Scope: "policy p", Ratios: []float64{math.Exp(-0.1), math.Exp(-0.05), 1, math.Exp(0.05), math.Exp(0.1)}}
	for _, c := range []struct {
		window    time.Duration
		sim, want float64
	}{
		{100 * time.Second, 0.95, 0.5},
		{seconds(100 * math.Exp(1.533206*0.0866025)), 0.99, 0.9},
		{seconds(100 * math.Exp(1.533206*0.0866025)), 0.7, 0.7},
	} {
		p := &Prediction{P50: 100 * time.Second, P90: 101 * time.Second, Window: c.window, InWindow: c.sim}
		ApplyRecord(p, rec)
		if math.Abs(p.InWindow-c.want) > 1e-4 {
			t.Errorf("window %s, simulated %.2f: in window %.4f, want %.4f", c.window, c.sim, p.InWindow, c.want)
		}
	}
}

// Runs that all took 1.2 times their P50 have no spread: the factor is
// 1.2, and the window is a step at 1.2 × P50.
func TestApplyRecordWithoutSpread(t *testing.T) {
	rec := Record{Scope: "policy p", Ratios: []float64{1.2, 1.2, 1.2, 1.2, 1.2}}
	for _, c := range []struct {
		window time.Duration
		want   float64
	}{{119 * time.Second, 0}, {121 * time.Second, 1}} {
		p := &Prediction{P50: 100 * time.Second, P90: 100 * time.Second, Window: c.window, InWindow: 1}
		ApplyRecord(p, rec)
		if p.P90 != 120*time.Second || p.InWindow != c.want {
			t.Errorf("window %s: P90 %s, in window %.2f; want 2m0s and %.0f", c.window, p.P90, p.InWindow, c.want)
		}
	}
}

// Predict applies the input's record: a model without variance gives a
// P90 equal to its P50, widened by the five runs to 1.48980 × P50.
func TestPredictAppliesTheRecord(t *testing.T) {
	p, err := Predict(Input{Tasks: fleet(1, 4, 8, 1, 1), Concurrency: 8, Record: fiveRuns})
	if err != nil {
		t.Fatal(err)
	}
	if p.P50 != 2*time.Second || p.SimulatedP90 != 2*time.Second {
		t.Fatalf("P50 %s, simulated P90 %s; want 2s", p.P50, p.SimulatedP90)
	}
	if !sameToTheMillisecond(p.P90, 2979590*time.Microsecond) {
		t.Errorf("P90 %s, want 2.980s", p.P90)
	}
}

// sameToTheMillisecond compares a computed prediction (arithmetic on the
// record, no clock involved) with a value worked out by hand, which is
// rounded to the microsecond.
func sameToTheMillisecond(got, want time.Duration) bool {
	return (got - want).Abs() <= time.Millisecond
}
