package fit

import (
	"fmt"
	"math"
	"testing"
)

// Points on a known curve give the curve back: λ = 10, σ = 0.1,
// κ = 0.001, whose knee is √(0.9 / 0.001) = 30.
func TestUSLFitsAKnownCurve(t *testing.T) {
	var pts []Throughput
	for _, n := range []int{1, 2, 4, 8, 16, 32, 64} {
		x := float64(n)
		pts = append(pts, Throughput{Concurrency: n, Rate: 10 * x / (1 + 0.1*(x-1) + 0.001*x*(x-1))})
	}
	u, err := USLOf(pts)
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
	lin, err := USLOf([]Throughput{{Concurrency: 1, Rate: 5}, {Concurrency: 2, Rate: 10}, {Concurrency: 8, Rate: 40}})
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
		if _, err := USLOf(pts); err == nil {
			t.Errorf("%s: no error", fmt.Sprint(pts))
		}
	}
}
