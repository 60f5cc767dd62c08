package plan

import (
	"math"
	"testing"
)

// The 90% quantiles against the printed table (e.g. NIST/SEMATECH
// e-Handbook 1.3.6.7.2) and the normal's 1.2816 as df grows; df 1 is the
// Cauchy, tan(0.4π) exactly.
func TestStudentQuantileAgainstTable(t *testing.T) {
	for _, c := range []struct{ df, want float64 }{
		{1, math.Tan(0.4 * math.Pi)}, {2, 1.886}, {3, 1.638}, {4, 1.533}, {9, 1.383}, {19, 1.328}, {1e6, 1.2816},
	} {
		if got := studentQuantile(0.9, c.df); math.Abs(got-c.want) > 5e-4 {
			t.Errorf("t(0.9, df %g) = %.4f, want %.4f", c.df, got, c.want)
		}
	}
}

// df 2 has a closed form: F(t) = 1/2 + t / (2·sqrt(2+t²)).
func TestStudentCDFClosedForm(t *testing.T) {
	for _, x := range []float64{-3, -1, 0, 0.5, 2, 10} {
		want := 0.5 + x/(2*math.Sqrt(2+x*x))
		if got := studentCDF(x, 2); math.Abs(got-want) > 1e-12 {
			t.Errorf("F(%g; 2) = %.15f, want %.15f", x, got, want)
		}
	}
}
