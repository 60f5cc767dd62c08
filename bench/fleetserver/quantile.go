package fleetserver

import (
	"slices"
	"time"
)

// Quantile is the nearest-rank quantile q (0..1] of d: of 5 samples, the
// median is the 3rd and the p95 the 5th.
func Quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}
