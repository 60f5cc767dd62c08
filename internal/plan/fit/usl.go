package fit

import (
	"errors"
	"math"
)

// Throughput is a measured run: its concurrency and its throughput (VMs
// or bytes per second, the same unit for every point).
type Throughput struct {
	Concurrency int
	Rate        float64
}

// USL is the Universal Scalability Law fitted to measured runs:
// X(N) = λN / (1 + σ(N−1) + κN(N−1)), with σ the contention and κ the
// coherency cost. It is the curve FlashCopy Manager's gains flatten
// along; a linear assumption would extrapolate them forever.
type USL struct {
	Lambda, Sigma, Kappa float64
}

// USLOf fits σ and κ by least squares on the linearised form
// N/C(N) − 1 = σ(N−1) + κN(N−1), with C(N) = X(N)/λ and λ the throughput
// per unit of concurrency at the smallest concurrency measured. It needs
// at least three distinct concurrencies, one of them 1 or λ is a guess.
func USLOf(points []Throughput) (USL, error) {
	distinct := map[int]bool{}
	lowest := Throughput{Concurrency: math.MaxInt}
	for _, p := range points {
		if p.Concurrency < 1 || p.Rate <= 0 || math.IsNaN(p.Rate) || math.IsInf(p.Rate, 0) {
			return USL{}, errors.New("plan: a measured run needs a concurrency of at least 1 and a positive rate")
		}
		distinct[p.Concurrency] = true
		if p.Concurrency < lowest.Concurrency {
			lowest = p
		}
	}
	if len(distinct) < 3 {
		return USL{}, errors.New("plan: fitting the scalability curve needs runs at three concurrencies or more")
	}
	// λ from the lowest concurrency, assuming it scales linearly up to it.
	lambda := lowest.Rate / float64(lowest.Concurrency)
	// y = σ(N−1) + κN(N−1), without intercept (lsq.go).
	rows, y := make([][]float64, len(points)), make([]float64, len(points))
	for i, p := range points {
		n := float64(p.Concurrency)
		rows[i], y[i] = []float64{n - 1, n * (n - 1)}, n/(p.Rate/lambda)-1
	}
	beta, ok := LeastSquares(rows, y)
	if !ok {
		return USL{}, errors.New("plan: the measured runs do not determine a curve")
	}
	u := USL{Lambda: lambda, Sigma: beta[0], Kappa: beta[1]}
	u.Sigma, u.Kappa = max(u.Sigma, 0), max(u.Kappa, 0)
	return u, nil
}

// Rate is the fitted throughput at concurrency n.
func (u USL) Rate(n int) float64 {
	x := float64(n)
	return u.Lambda * x / (1 + u.Sigma*(x-1) + u.Kappa*x*(x-1))
}

// Knee is the concurrency of the highest throughput, √((1−σ)/κ); past it
// more concurrency lowers throughput. Without coherency cost there is no
// knee (0): the curve only flattens, towards λ/σ.
func (u USL) Knee() int {
	if u.Kappa <= 0 || u.Sigma >= 1 {
		return 0
	}
	return int(math.Round(math.Sqrt((1 - u.Sigma) / u.Kappa)))
}
