package fit

import "math"

// Student's t distribution, for a spread estimated from few samples: the
// record of a policy's runs may hold five of them, and a normal quantile
// from five samples' deviation understates where the sixth may fall.

// StudentCDF is P(T ≤ t) for Student's t with df degrees of freedom.
func StudentCDF(t, df float64) float64 {
	if math.IsInf(t, 1) {
		return 1
	}
	if math.IsInf(t, -1) {
		return 0
	}
	// P(|T| > |t|) = I_x(df/2, 1/2) with x = df/(df+t²).
	tail := 0.5 * regIncBeta(df/(df+t*t), df/2, 0.5)
	if t > 0 {
		return 1 - tail
	}
	return tail
}

// StudentQuantile is the t with P(T ≤ t) = p, by bisection on the CDF
// (monotone, and 200 halvings of ±10⁶ reach float precision).
func StudentQuantile(p, df float64) float64 {
	lo, hi := -1e6, 1e6
	for range 200 {
		mid := (lo + hi) / 2
		if StudentCDF(mid, df) < p {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// regIncBeta is the regularised incomplete beta function I_x(a, b), by
// its continued fraction (Lentz's method), on the side where it
// converges fast.
func regIncBeta(x, a, b float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	front := math.Exp(lab - la - lb + a*math.Log(x) + b*math.Log1p(-x))
	if x < (a+1)/(a+b+2) {
		return front * betaCF(x, a, b) / a
	}
	return 1 - front*betaCF(1-x, b, a)/b
}

func betaCF(x, a, b float64) float64 {
	const tiny = 1e-300
	c, d := 1.0, 1-(a+b)*x/(a+1)
	if math.Abs(d) < tiny {
		d = tiny
	}
	d = 1 / d
	h := d
	for m := 1; m <= 300; m++ {
		fm := float64(m)
		for _, num := range []float64{
			fm * (b - fm) * x / ((a + 2*fm - 1) * (a + 2*fm)),
			-(a + fm) * (a + b + fm) * x / ((a + 2*fm) * (a + 2*fm + 1)),
		} {
			d = 1 + num*d
			if math.Abs(d) < tiny {
				d = tiny
			}
			c = 1 + num/c
			if math.Abs(c) < tiny {
				c = tiny
			}
			d = 1 / d
			h *= d * c
		}
		if math.Abs(d*c-1) < 1e-15 {
			break
		}
	}
	return h
}
