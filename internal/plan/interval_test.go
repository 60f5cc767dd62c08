package plan

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/coffer-backup/coffer/internal/plan/fit"
)

// Two runs at 1 in flight and two at 3, each load's pair centred on
// T(N) = N: the fit is σ = 1 through the means, and its leverage by hand
// (rows [1/N, (N−1)/N], X̃ᵀX̃ = [20/9 4/9; 4/9 8/9], inverse [1/2 −1/4;
// −1/4 5/4]) is 1/2 at both recorded loads, 76.5/81 at 9 and tends to
// 5/4 far beyond: the farther from the runs, the less the fit knows.
func TestLeverageByHand(t *testing.T) {
	g, err := FitCostGrowth([]CostPoint{{1, 0.9}, {1, 1.1}, {3, 2.7}, {3, 3.3}})
	if err != nil {
		t.Fatal(err)
	}
	if !near(g.Base, 1, 1e-9) || !near(g.Sigma, 1, 1e-9) || g.Kappa != 0 {
		t.Fatalf("fit %+v, want T(N) = N", g)
	}
	for _, c := range []struct{ n, h float64 }{{1, 0.5}, {3, 0.5}, {9, 76.5 / 81}, {1e6, 1.25}} {
		if h := g.Leverage(c.n); !near(h, c.h, 1e-5) {
			t.Errorf("leverage at %g: %.6f, want %.6f", c.n, h, c.h)
		}
	}
	if g.Dof() != 2 {
		t.Errorf("degrees of freedom %d, want 4 runs − 2 parameters", g.Dof())
	}
	if want := g.Spread * math.Sqrt(1+76.5/81); !near(g.PredictionSpread(9), want, 1e-9) {
		t.Errorf("prediction spread at 9: %v, want %v", g.PredictionSpread(9), want)
	}

	// No growth: the mean of n runs, leverage 1/n everywhere.
	flat, _ := FitCostGrowth([]CostPoint{{8, 1}, {8, 1.2}, {9, 0.9}, {8, 1.1}})
	if flat.Grows() || !near(flat.Leverage(8), 0.25, 1e-9) || !near(flat.Leverage(256), 0.25, 1e-9) || flat.Dof() != 3 {
		t.Errorf("no growth: leverage %v and %v, %d degrees of freedom; want 1/4 and 3", flat.Leverage(8), flat.Leverage(256), flat.Dof())
	}

	// A growth given by hand carries no fit: its spread is used as is.
	if h, d := (CostGrowth{Base: 1, Sigma: 0.1, Spread: 0.2}).Leverage(64), (CostGrowth{Runs: 6}).Dof(); h != 0 || d != 0 {
		t.Errorf("a growth given by hand: leverage %v, %d degrees of freedom; want 0 and 0", h, d)
	}
}

// A fleet with no variance of its own takes base × the run factor, so
// its P90 over its P50 is e^(s·√(1+h(n))·t₀.₉) with t at the fit's
// degrees of freedom: wider at 9 in flight than at 3, where the runs
// were recorded, and wider than the normal's e^(1.2816·s) at either.
func TestRunFactorIsAPredictionInterval(t *testing.T) {
	g, err := FitCostGrowth([]CostPoint{{1, 0.9}, {1, 1.1}, {3, 2.7}, {3, 3.3}})
	if err != nil {
		t.Fatal(err)
	}
	ratio := func(conc int) float64 {
		var ts []Task
		for i := range conc {
			ts = append(ts, Task{Name: string(rune('a' + i)), Snapshot: Dist{Mean: 1}, Load: 1})
		}
		p, err := Predict(Input{Tasks: ts, Concurrency: conc, Growth: g, RunSpread: g.Spread, Runs: 4000, Seed: 5})
		if err != nil {
			t.Fatal(err)
		}
		return p.P90.Seconds() / p.P50.Seconds()
	}
	t90 := fit.StudentQuantile(0.9, 2)
	for _, conc := range []int{3, 9} {
		want := math.Exp(g.Spread * math.Sqrt(1+g.Leverage(float64(conc))) * t90)
		if got := ratio(conc); !near(got, want, 0.03) {
			t.Errorf("%d in flight: P90/P50 %.4f, want %.4f", conc, got, want)
		}
	}
	if at3, at9, normal := ratio(3), ratio(9), math.Exp(1.2816*g.Spread); !(at9 > at3 && at3 > normal) {
		t.Errorf("P90/P50 %.4f at 9, %.4f at 3, the normal's %.4f: want each wider than the next", at9, at3, normal)
	}
}

// The t draws have the quantiles of Student's t (4 degrees of freedom:
// 90th percentile 1.533), and past maxExactDof the normal's.
func TestStudentDraw(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		dof  int
		want float64
	}{{4, fit.StudentQuantile(0.9, 4)}, {0, 1.2816}, {maxExactDof + 1, 1.2816}} {
		xs := make([]float64, 40000)
		for i := range xs {
			xs[i] = studentDraw(rng, c.dof)
		}
		sort.Float64s(xs)
		if got := percentile(xs, 0.9); !near(got, c.want, 0.03) {
			t.Errorf("%d degrees of freedom: 90th percentile %.4f, want %.4f", c.dof, got, c.want)
		}
	}
}
