package console

import (
	"fmt"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/config"
)

// A repository's usage trend as the dashboard and the repositories page
// show it: the API's samples as a sparkline, its trend and estimated
// full date (repository-usage), and how they were made.

type usageView struct {
	U api.RepositoryUsage
	// Spark is the sparkline's polyline in a 200×40 box; Trend the slope
	// per day, signed; Full the estimated full date.
	Spark, Trend, Full string
}

// usage reads a repository's usage; a refusal or failure shows no trend
// (the sizes beside it come from stats, which said what went wrong).
func (p *page) usage(repo string) *usageView {
	var u api.RepositoryUsage
	if _, err := p.api.call("repository-usage", map[string]string{"repo": repo}, nil, nil, &u); err != nil {
		return nil
	}
	v := &usageView{U: u, Spark: sparkline(u.Samples)}
	if u.HasTrend {
		sign := "+"
		if u.GrowthPerDayBytes < 0 {
			sign = "−"
		}
		v.Trend = sign + config.HumanBytes(int64(max(u.GrowthPerDayBytes, -u.GrowthPerDayBytes)))
	}
	if !u.EstimatedFull.IsZero() {
		v.Full = u.EstimatedFull.Local().Format("2006-01-02")
	}
	return v
}

// sparkline draws stored bytes over time, scaled to the samples' own
// range (the shape of the growth; the figures say the sizes).
func sparkline(ss []api.UsageSample) string {
	if len(ss) < 2 {
		return ""
	}
	t0, t1 := ss[0].At, ss[len(ss)-1].At
	lo, hi := ss[0].StoredBytes, ss[0].StoredBytes
	for _, s := range ss {
		lo, hi = min(lo, s.StoredBytes), max(hi, s.StoredBytes)
	}
	span, rng := t1.Sub(t0).Seconds(), float64(hi-lo)
	var b strings.Builder
	for _, s := range ss {
		x, y := 0.0, 20.0
		if span > 0 {
			x = s.At.Sub(t0).Seconds() / span * 200
		}
		if rng > 0 {
			y = 38 - float64(s.StoredBytes-lo)/rng*36
		}
		fmt.Fprintf(&b, "%.1f,%.1f ", x, y)
	}
	return strings.TrimSpace(b.String())
}
