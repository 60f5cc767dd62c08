package plan

import (
	"errors"
	"math"

	"github.com/coffer-backup/coffer/internal/plan/fit"
)

// Per-VM fixed costs (snapshot create and remove, setup, the rest of the
// attempt) are not constants: a management plane answering 256 snapshot
// calls at once, or coffer and the hypervisor sharing a few cores, take
// longer over each of them than over 8. Costs recorded at one concurrency
// and used unchanged at another are what made the 256-task prediction of
// docs/benchmarks-planner.md 10 times too short. The growth is modelled
// with the Universal Scalability Law's denominator, the time per unit of
// work at N in flight relative to 1:
//
//	T(N) = T₁ · (1 + σ(N−1) + κN(N−1))
//
// fitted to the recorded runs' mean fixed cost per VM at the load each ran
// at (history.go: the mean number of tasks in flight over each task's
// life), and the spread of the runs around the fit is the run-to-run
// factor of the Monte Carlo (sim.go). Each VM's recorded costs are taken
// to one task in flight by this curve before they are summarised
// (normalise.go), and scaled back from there to each simulated phase's
// concurrency, so that the load they were recorded at is counted once,
// here, and not again as the VM's variance.

// CostPoint is one recorded run: the mean VM tasks in flight over its
// tasks' lives, and its mean fixed cost per VM in seconds.
type CostPoint struct {
	Load, Seconds float64
}

// CostGrowth is the fitted growth of the fixed costs with concurrency.
type CostGrowth struct {
	// Base is T₁, the fixed cost per VM alone; Sigma and Kappa the USL's
	// contention and coherency terms. Sigma = Kappa = 0: no growth (the
	// costs are used as recorded, at any concurrency).
	Base, Sigma, Kappa float64
	// Runs is the recorded runs the fit used; MinLoad and MaxLoad the
	// range of their loads (beyond MaxLoad the curve is extrapolated).
	Runs             int
	MinLoad, MaxLoad float64
	// Spread is the standard deviation of the runs' log ratio to the
	// fit, with the fit's parameters taken off the degrees of freedom:
	// how much a whole run moves, all its VMs together (0: unknown,
	// too few runs).
	Spread float64
	// params is the fit's number of parameters and cov its (X̃ᵀX̃)⁻¹,
	// for the prediction interval (interval.go); 0 for a growth not
	// fitted by FitCostGrowth.
	params int
	cov    [3][3]float64
}

// Factor is the cost at n tasks in flight relative to one alone.
func (g CostGrowth) Factor(n float64) float64 {
	n = max(n, 1)
	return 1 + g.Sigma*(n-1) + g.Kappa*n*(n-1)
}

// Scale is the factor taking a cost recorded at load `from` to load `to`.
func (g CostGrowth) Scale(from, to float64) float64 {
	if from <= 0 || (g.Sigma == 0 && g.Kappa == 0) {
		return 1
	}
	return g.Factor(to) / g.Factor(from)
}

// Grows says whether the fit found costs growing with concurrency.
func (g CostGrowth) Grows() bool { return g.Sigma > 0 || g.Kappa > 0 }

// MinLoadSpan is how far apart the recorded runs' loads must be for a
// growth to be fitted: runs at 8 and 10 in flight say nothing of 256.
const MinLoadSpan = 2.0

// FitCostGrowth fits the growth to recorded runs. With loads spanning at
// least MinLoadSpan it fits, by least squares of the relative residuals
// (fitTerms) on T(N) = a + b(N−1) + cN(N−1) (σ = b/a, κ = c/a), with no
// negative term, σ alone and κ alone, and keeps the closer (a convex
// curve with a negative σ is better told by κ alone than by a line that
// misses its low end); with three distinct loads or more, σ and κ
// together when the third term passes an F-test at 5%. Costs that do
// not grow, or loads too close together, give no growth, and the spread
// is then around the runs' mean. It needs one run with a positive load
// and cost.
func FitCostGrowth(points []CostPoint) (CostGrowth, error) {
	var pts []CostPoint
	for _, p := range points {
		if p.Load > 0 && p.Seconds > 0 && !math.IsInf(p.Seconds, 0) && !math.IsNaN(p.Seconds) {
			pts = append(pts, p)
		}
	}
	if len(pts) == 0 {
		return CostGrowth{}, errors.New("plan: no recorded run with fixed costs")
	}
	g := CostGrowth{Runs: len(pts), MinLoad: pts[0].Load, MaxLoad: pts[0].Load}
	distinct := map[float64]bool{}
	for _, p := range pts {
		g.MinLoad, g.MaxLoad = min(g.MinLoad, p.Load), max(g.MaxLoad, p.Load)
		distinct[math.Round(p.Load)] = true
	}
	if g.MaxLoad >= MinLoadSpan*g.MinLoad {
		// The closer of σ alone and κ alone (the same parameters: the
		// smaller relative residual; a tie, as with two loads where both
		// go through the means, keeps σ alone).
		best, bestSS := CostGrowth{}, math.Inf(1)
		for _, kappa := range []bool{false, true} {
			fit, ok := fitModel(g, pts, !kappa, kappa)
			if !ok {
				continue
			}
			if ss := sumOfSquares(pts, fit); ss < bestSS*(1-1e-9) {
				best, bestSS = fit, ss
				best.Spread = spread(pts, fit, 2)
			}
		}
		// σ and κ together only when the third parameter earns its
		// place: an F-test of the nested fits at 5%. With three loads
		// the full curve goes through their means, noise included, and
		// bends the extrapolation: on the QEMU fleet's runs at 1, 4 and
		// 12 in flight (two each) it was chosen for 0.0081 against
		// 0.0102 of residual variance per degree of freedom, an F of 2.0
		// where chance alone reaches 10.1 one time in 20, and took 24 in
		// flight to 28 times the cost alone instead of 22.
		if len(distinct) >= 3 {
			if full, ok := fitModel(g, pts, true, true); ok && (!best.Grows() || earnsThirdTerm(bestSS, sumOfSquares(pts, full), len(pts))) {
				best = full
				best.Spread = spread(pts, full, 3)
			}
		}
		if best.Grows() {
			return best, nil
		}
	}
	var sum float64
	for _, p := range pts {
		sum += p.Seconds
	}
	g.Base = sum / float64(len(pts))
	g.Spread = spread(pts, g, 1)
	return withCovariance(g, pts, false, false), nil
}

// fitTerms fits T(N) = a + b(N−1) + c·N(N−1) to the runs, with the
// terms not wanted left out (0), by least squares on the relative
// residuals (T − fit)/fit: iteratively reweighted (lsq.go), each run
// weighed by 1/fit² of the fit before, from an unweighted start.
//
// Why relative: the fit is used as ratios, each recorded cost divided by
// F(its load) to take it alone (normalise.go) and the spread taken of
// log ratios, but plain least squares in seconds is ruled by the runs at
// the highest loads, whose costs are the largest. On the QEMU fleet's
// calibration (transfer time per MB of 0.0029 s at 1 in flight, 0.010 at
// 4, 0.032 at 12: less than linear below 4, on 2 cores) it put the base
// 15% under the runs at 1 and σ at 1.01, so that the costs recorded at 4
// and 12, taken alone, came out 10% to 15% cheaper than those recorded
// alone; weighed relatively, base and σ (0.88) leave every level within
// its runs' own noise. Weights 1/fit² rather than 1/T²: the runs of one
// load weigh the same, so that the fit of two loads still goes through
// their means.
func fitTerms(pts []CostPoint, sigma, kappa bool) (a, b, c float64, ok bool) {
	rows, y := make([][]float64, len(pts)), make([]float64, len(pts))
	for i, p := range pts {
		n := p.Load
		rows[i] = []float64{1}
		if sigma {
			rows[i] = append(rows[i], n-1)
		}
		if kappa {
			rows[i] = append(rows[i], n*(n-1))
		}
		y[i] = p.Seconds
	}
	weights := make([]float64, len(pts))
	for i := range weights {
		weights[i] = 1
	}
	wrows, wy := make([][]float64, len(pts)), make([]float64, len(pts))
	var beta []float64
	for iter := 0; iter < maxReweighting; iter++ {
		for i := range rows {
			wrows[i] = make([]float64, len(rows[i]))
			for j, x := range rows[i] {
				wrows[i][j] = x * weights[i]
			}
			wy[i] = y[i] * weights[i]
		}
		next, ok := fit.LeastSquares(wrows, wy)
		if !ok {
			return 0, 0, 0, false
		}
		converged := beta != nil
		for j := range next {
			if converged && math.Abs(next[j]-beta[j]) > 1e-12*math.Max(math.Abs(beta[j]), 1e-300) {
				converged = false
			}
		}
		beta = next
		if converged {
			break
		}
		for i := range rows {
			f := 0.0
			for j, x := range rows[i] {
				f += x * beta[j]
			}
			if f <= 0 { // a curve through zero: no relative fit; the caller drops it
				return 0, 0, 0, false
			}
			weights[i] = 1 / f
		}
	}
	a, i := beta[0], 1
	if sigma {
		b, i = beta[i], i+1
	}
	if kappa {
		c = beta[i]
	}
	return a, b, c, true
}

// maxReweighting bounds the fit's iterations; it converges in a few.
const maxReweighting = 50

// fitModel is the fit of the terms wanted, if it grows with no negative
// term.
func fitModel(g CostGrowth, pts []CostPoint, sigma, kappa bool) (CostGrowth, bool) {
	a, b, c, ok := fitTerms(pts, sigma, kappa)
	if !ok || a <= 0 || b < 0 || c < 0 || b+c == 0 {
		return CostGrowth{}, false
	}
	g.Base, g.Sigma, g.Kappa = a, b/a, c/a
	return withCovariance(g, pts, sigma, kappa), true
}

// earnsThirdTerm is the F-test of a third term over two, at 5%: the
// residual sums of squares of the two fits over n runs. With no degree
// of freedom left, the third term cannot show it earns anything.
func earnsThirdTerm(ss2, ss3 float64, n int) bool {
	dof := n - 3
	if dof < 1 {
		return false
	}
	if ss3 <= 0 {
		return ss2 > 0
	}
	return (ss2-ss3)/(ss3/float64(dof)) > fCritical(dof)
}

// fCritical is the F(1, dof) distribution's 95th percentile, the square
// of Student's t at 97.5% (tabulated; beyond 30 degrees of freedom the
// normal's 1.96², at most 4% under the exact value).
func fCritical(dof int) float64 {
	t := [...]float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
		2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
		2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}
	if dof <= len(t) {
		return t[dof-1] * t[dof-1]
	}
	return 1.96 * 1.96
}

// sumOfSquares is the fit's sum of squared relative residuals, the
// quantity fitTerms minimises.
func sumOfSquares(pts []CostPoint, g CostGrowth) float64 {
	var ss float64
	for _, p := range pts {
		f := g.Base * g.Factor(p.Load)
		r := (p.Seconds - f) / f
		ss += r * r
	}
	return ss
}

// spread is the standard deviation of ln(recorded / fitted) over the
// runs, with params degrees of freedom taken by the fit; 0 when none are
// left.
func spread(pts []CostPoint, g CostGrowth, params int) float64 {
	if len(pts) <= params {
		return 0
	}
	var ss float64
	for _, p := range pts {
		r := math.Log(p.Seconds / (g.Base * g.Factor(p.Load)))
		ss += r * r
	}
	return math.Sqrt(ss / float64(len(pts)-params))
}
