package fit

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// TestStudentTAgainstGonum holds the hand-written distribution (kept in
// the planner so that the binary does not carry a statistics library for
// one quantile) to gonum's, over the degrees of freedom a policy's record
// gives (2 to 20 runs, and far beyond) and the probabilities the planner
// asks for.
func TestStudentTAgainstGonum(t *testing.T) {
	for _, df := range []float64{1, 2, 3, 4, 5, 7, 10, 19, 30, 100, 1000} {
		ref := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}
		for _, p := range []float64{0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99} {
			want := ref.Quantile(p)
			if got := StudentQuantile(p, df); math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
				t.Errorf("quantile(%g, df=%g) = %.9g, gonum %.9g", p, df, got, want)
			}
		}
		for _, x := range []float64{-8, -2.5, -1, -0.1, 0, 0.3, 1.7, 4, 12} {
			want := ref.CDF(x)
			if got := StudentCDF(x, df); math.Abs(got-want) > 1e-9 {
				t.Errorf("cdf(%g, df=%g) = %.12g, gonum %.12g", x, df, got, want)
			}
		}
	}
}
