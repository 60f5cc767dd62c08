// Package fit holds the planner's statistics: least squares, Student's t
// distribution and the Universal Scalability Law fitted to measured
// throughputs. Plain math over float64s, kept apart from the simulation.
package fit

import "math"

// LeastSquares fits y ≈ Σⱼ βⱼ·xⱼ by ordinary least squares, one row of
// regressors per observation (a constant 1 among them for an intercept).
// It is the one fit behind both scalability curves: the USL's σ and κ
// from measured throughputs (usl.go, no intercept) and the growth of the
// recorded costs with concurrency (growth.go, with one). The normal
// equations XᵀXβ = Xᵀy are solved by Gauss-Jordan elimination with
// partial pivoting: there are at most three regressors, and they are of
// very different sizes (1, N−1, N(N−1)), which pivoting copes with.
// ok is false when there are fewer observations than regressors or the
// regressors do not determine β (a singular system).
func LeastSquares(rows [][]float64, y []float64) (beta []float64, ok bool) {
	if len(rows) == 0 || len(rows) != len(y) {
		return nil, false
	}
	k := len(rows[0])
	if k == 0 || len(rows) < k {
		return nil, false
	}
	m := make([][]float64, k)
	for i := range m {
		m[i] = make([]float64, k+1)
	}
	for r, x := range rows {
		for i := range k {
			for j := range k {
				m[i][j] += x[i] * x[j]
			}
			m[i][k] += x[i] * y[r]
		}
	}
	return Solve(m)
}

// solve solves the augmented k×(k+1) system in place; false when it is
// singular (a pivot negligible beside the system's scale).
func Solve(m [][]float64) ([]float64, bool) {
	k := len(m)
	scale := 0.0
	for i := range k {
		scale = math.Max(scale, math.Abs(m[i][i]))
	}
	for col := range k {
		piv := col
		for r := col + 1; r < k; r++ {
			if math.Abs(m[r][col]) > math.Abs(m[piv][col]) {
				piv = r
			}
		}
		if math.Abs(m[piv][col]) <= 1e-12*scale {
			return nil, false
		}
		m[col], m[piv] = m[piv], m[col]
		for r := range k {
			if r == col {
				continue
			}
			f := m[r][col] / m[col][col]
			for j := col; j <= k; j++ {
				m[r][j] -= f * m[col][j]
			}
		}
	}
	out := make([]float64, k)
	for i := range k {
		out[i] = m[i][k] / m[i][i]
	}
	return out, true
}
