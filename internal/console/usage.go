package console

import (
	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/console/format"
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
	v := &usageView{U: u, Spark: format.Sparkline(u.Samples)}
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
