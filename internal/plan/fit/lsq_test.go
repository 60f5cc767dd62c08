package fit

import (
	"math"
	"testing"
)

// Hand-computed fits: through (0, 1), (1, 3), (2, 2) the line has slope
// Sxy/Sxx = 1/2 and intercept ȳ − b·x̄ = 2 − 1/2 = 3/2; without an
// intercept, y = βx through (1, 2), (2, 3) gives β = Σxy/Σx² = 8/5.
func TestLeastSquaresByHand(t *testing.T) {
	beta, ok := LeastSquares([][]float64{{1, 0}, {1, 1}, {1, 2}}, []float64{1, 3, 2})
	if !ok || !near(beta[0], 1.5, 1e-12) || !near(beta[1], 0.5, 1e-12) {
		t.Errorf("line: %v %v, want [1.5 0.5]", beta, ok)
	}
	beta, ok = LeastSquares([][]float64{{1}, {2}}, []float64{2, 3})
	if !ok || !near(beta[0], 1.6, 1e-12) {
		t.Errorf("through the origin: %v %v, want [1.6]", beta, ok)
	}
	// Three regressors of very different sizes (the growth's 1, N−1 and
	// N(N−1) at 8, 64 and 256 in flight) and an exact curve: its
	// coefficients come back.
	var rows [][]float64
	var y []float64
	for _, n := range []float64{8, 64, 256} {
		rows = append(rows, []float64{1, n - 1, n * (n - 1)})
		y = append(y, 2+0.03*(n-1)+0.0004*n*(n-1))
	}
	beta, ok = LeastSquares(rows, y)
	if !ok || !near(beta[0], 2, 1e-6) || !near(beta[1], 0.03, 1e-6) || !near(beta[2], 0.0004, 1e-6) {
		t.Errorf("three terms: %v %v, want [2 0.03 0.0004]", beta, ok)
	}
	// Two observations of one x cannot tell an intercept from a slope,
	// and fewer observations than regressors determine nothing.
	if beta, ok := LeastSquares([][]float64{{1, 4}, {1, 4}}, []float64{1, 2}); ok {
		t.Errorf("singular system solved: %v", beta)
	}
	if beta, ok := LeastSquares([][]float64{{1, 4}}, []float64{1}); ok {
		t.Errorf("one observation, two regressors: %v", beta)
	}
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b)) }
