package plan

import (
	"math"
	"math/rand/v2"

	"github.com/coffer-backup/coffer/internal/plan/fit"
)

// The run-to-run factor as a prediction interval. A growth's Spread is
// how far the recorded runs fell from its fit; a run not yet made falls
// further from it than that, for two reasons the spread alone leaves out:
//
//   - the fit is itself uncertain, the more so the farther from the
//     concurrencies it was recorded at. A fleet of 24 run at 24 in flight
//     from runs at 1, 4 and 12 is an extrapolation, and on the QEMU
//     fleet's quiet runs five of six at 24 came out longer than the P50,
//     three of them outside a P90 that was only the spread's;
//   - a deviation estimated from six runs is itself uncertain: one more
//     run's distance from the fit follows Student's t with the runs'
//     degrees of freedom, not the normal (its 90th percentile is 1.53
//     deviations at 4 degrees of freedom, against the normal's 1.28).
//
// Both are the textbook prediction interval of a regression, here of the
// weighted (relative) least squares of fitTerms: the log of a new run's
// ratio to the fit at n in flight has the deviation Spread·√(1 + h(n)),
// where h(n) = x̃ᵀ(X̃ᵀX̃)⁻¹x̃ is the leverage of n (x̃ the regressors
// [1, n−1, n(n−1)] of the terms fitted, divided by the fit at n, as
// fitTerms weighs its rows), and it is drawn from Student's t with Runs −
// parameters degrees of freedom. A fit of many runs across the
// concurrency planned gives h near 1/Runs and a t near the normal: the
// interval is the spread's; a fit of few runs far from it widens the P90,
// as it should, and says so among the plan's assumptions.

// withCovariance records on g, fitted to pts with the terms named, what
// the leverage needs: (X̃ᵀX̃)⁻¹ in the coordinates [1, N−1, N(N−1)], the
// terms left out as zero rows and columns.
func withCovariance(g CostGrowth, pts []CostPoint, sigma, kappa bool) CostGrowth {
	cols := []int{0}
	if sigma {
		cols = append(cols, 1)
	}
	if kappa {
		cols = append(cols, 2)
	}
	k := len(cols)
	g.params = k
	g.cov = [3][3]float64{}
	m := make([][]float64, k)
	for i := range m {
		m[i] = make([]float64, k)
	}
	for _, p := range pts {
		x := g.regressors(p.Load)
		for i, ci := range cols {
			for j, cj := range cols {
				m[i][j] += x[ci] * x[cj]
			}
		}
	}
	// (X̃ᵀX̃)⁻¹ column by column: at most 3×3.
	for j := range k {
		aug := make([][]float64, k)
		for i := range aug {
			aug[i] = append(append([]float64(nil), m[i]...), 0)
		}
		aug[j][k] = 1
		col, ok := fit.Solve(aug)
		if !ok {
			// A fit that leastSquares accepted has a regular system;
			// without one the interval is the spread's.
			g.cov = [3][3]float64{}
			return g
		}
		for i := range k {
			g.cov[cols[i]][cols[j]] = col[i]
		}
	}
	return g
}

// regressors are [1, n−1, n(n−1)] divided by the fit at n: a run's row
// as fitTerms weighs it.
func (g CostGrowth) regressors(n float64) [3]float64 {
	f := g.Base * g.Factor(n)
	if f <= 0 {
		return [3]float64{}
	}
	return [3]float64{1 / f, (n - 1) / f, n * (n - 1) / f}
}

// Leverage is h(n): the variance of the fit's log at n in flight, in
// units of the runs' variance around it. 0 for a growth not fitted here
// (given by hand): its spread is then used as it is.
func (g CostGrowth) Leverage(n float64) float64 {
	n = max(n, 1)
	x := g.regressors(n)
	var h float64
	for i := range 3 {
		for j := range 3 {
			h += x[i] * g.cov[i][j] * x[j]
		}
	}
	return max(h, 0)
}

// Dof is the degrees of freedom the spread was estimated with: the runs
// less the fit's parameters; 0 when unknown (a growth given by hand, or
// none left), and the run factor is then drawn from the normal.
func (g CostGrowth) Dof() int {
	if g.params == 0 {
		return 0
	}
	return max(g.Runs-g.params, 0)
}

// PredictionSpread is the deviation of the log of one more run's ratio
// to the fit, at n in flight.
func (g CostGrowth) PredictionSpread(n float64) float64 {
	return g.Spread * math.Sqrt(1+g.Leverage(n))
}

// runFactors are the deviations and degrees of freedom of the factor
// drawn once per simulated run, at the concurrency the fleet will run
// at: the growths' prediction spreads where they were fitted, the
// input's spreads as given otherwise. One draw moves both, so the fewer
// degrees of freedom rule it.
func runFactors(in *Input) (fixed, transfer float64, dof int) {
	n := float64(fleetInFlight(in.Concurrency, len(in.Tasks)))
	fixed, fixedDof := widened(in.RunSpread, in.Growth, n)
	transfer, transferDof := widened(in.TransferSpread, in.TransferGrowth, n)
	switch {
	case fixedDof == 0:
		return fixed, transfer, transferDof
	case transferDof == 0:
		return fixed, transfer, fixedDof
	}
	return fixed, transfer, min(fixedDof, transferDof)
}

// widened is a spread at n in flight and its degrees of freedom (0: the
// normal): as given when g was not fitted here.
func widened(spread float64, g CostGrowth, n float64) (float64, int) {
	if spread <= 0 || g.params == 0 {
		return spread, 0
	}
	return spread * math.Sqrt(1+g.Leverage(n)), g.Dof()
}

// fleetInFlight is the most VM tasks a fleet of vms runs at once under
// the concurrency limit: where the plan's interval is taken.
func fleetInFlight(concurrency, vms int) int { return max(min(concurrency, vms), 1) }

// maxExactDof is where a t draw becomes a normal one: past it the 90th
// percentiles differ by under 1%.
const maxExactDof = 100

// studentDraw draws from Student's t with dof degrees of freedom (the
// normal for 0 or past maxExactDof): a normal over the root of a χ² of
// dof squared normals, divided by dof. No library in the module draws
// it, and the sum is dof normals once per simulated run.
func studentDraw(rng *rand.Rand, dof int) float64 {
	z := rng.NormFloat64()
	if dof <= 0 || dof > maxExactDof {
		return z
	}
	var chi2 float64
	for range dof {
		v := rng.NormFloat64()
		chi2 += v * v
	}
	return z / math.Sqrt(chi2/float64(dof))
}
