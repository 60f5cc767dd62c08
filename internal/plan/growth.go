package plan

import (
	"errors"
	"math"
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
// (fitTerms) on T(N) = a + b(N−1) + cN(N−1) (σ = b/a, κ = c/a), of these
// with no negative term the one with the least relative residual
// variance per degree of freedom: σ alone, κ
// alone, σ and κ (three distinct loads or more; a convex curve with a
// negative σ is better told by κ alone than by a line that misses its
// low end). Costs that do
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
		type model struct{ sigma, kappa bool }
		models := []model{{true, false}, {false, true}, {true, true}}
		if len(distinct) < 3 {
			models = models[:2]
		}
		best, bestScore := CostGrowth{}, math.Inf(1)
		for _, m := range models {
			a, b, c, ok := fitTerms(pts, m.sigma, m.kappa)
			if !ok || a <= 0 || b < 0 || c < 0 || b+c == 0 {
				continue
			}
			fit := g
			fit.Base, fit.Sigma, fit.Kappa = a, b/a, c/a
			params := 2
			if m.sigma && m.kappa {
				params = 3
			}
			// The relative residual variance, per degree of freedom left: a third
			// parameter must earn its place (with three loads it always
			// goes through their means, noise included, and bends the
			// extrapolation); a fit with none left only when nothing
			// else fits.
			score := math.MaxFloat64
			if len(pts) > params {
				score = sumOfSquares(pts, fit) / float64(len(pts)-params)
			}
			// A tie (two loads: σ alone and κ alone both go through
			// their means) keeps the earlier, simpler model.
			if score < bestScore*(1-1e-9) {
				best, bestScore = fit, score
				best.Spread = spread(pts, fit, params)
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
	return g, nil
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
		next, ok := leastSquares(wrows, wy)
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
