package repoops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"context"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/repo"
)

// A repository's usage trend, from the samples the health monitor
// records (catalog.Usage). The trend is the slope of the least-squares
// line through the last usageWindow of samples; the estimated full date
// is when the newest sample reaches the capacity at that slope. Fewer
// than usageMinSamples samples, or samples spanning less than
// usageMinSpan, make no trend: a day's history says too little about a
// month.
const (
	usageMinSamples = 3
	usageMinSpan    = 24 * time.Hour
	usageShown      = 60
)

// RepositoryUsage is the default repository's usage over the last 30
// days, its trend and its estimated full date.
func (s Ops) RepositoryUsage(ctx context.Context, _ *api.RepoParam) (*api.RepositoryUsage, error) {
	return service.WithRepo(ctx, s.Service, service.DefaultRepo(), service.NoLease, func(r *repo.Repository) (*api.RepositoryUsage, error) {
		c, err := s.OpenCatalog(ctx)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		u, ok := catalog.UsageOf(c)
		if !ok {
			return &api.RepositoryUsage{Samples: []api.UsageSample{}, Estimate: "this catalog keeps no usage history"}, nil
		}
		now := time.Now()
		samples, err := u.ListUsageSamples(ctx, r.Config().ID, now.Add(-service.UsageWindow))
		if err != nil {
			return nil, err
		}
		doc := usageTrend(samples)
		return &doc, nil
	})
}

// usageTrend fits the samples (oldest first) and says how.
func usageTrend(samples []catalog.UsageSample) api.RepositoryUsage {
	doc := api.RepositoryUsage{Samples: thin(samples, usageShown)}
	if len(samples) == 0 {
		doc.Estimate = "no usage recorded yet: the server records it each time it computes the repository's statistics"
		return doc
	}
	first, last := samples[0], samples[len(samples)-1]
	doc.StoredBytes, doc.CapacityBytes = last.StoredBytes, last.CapacityBytes
	span := last.At.Sub(first.At)
	doc.WindowDays = span.Hours() / 24
	if len(samples) < usageMinSamples || span < usageMinSpan {
		doc.Estimate = fmt.Sprintf("not enough history for a trend: %d sample(s) over %s; it needs %d over a day or more",
			len(samples), span.Round(time.Minute), usageMinSamples)
		return doc
	}
	// Least squares of stored bytes over days since the first sample.
	var n, sx, sy, sxx, sxy float64
	for _, s := range samples {
		x := s.At.Sub(first.At).Hours() / 24
		y := float64(s.StoredBytes)
		n++
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	slope := (n*sxy - sx*sy) / (n*sxx - sx*sx)
	doc.GrowthPerDayBytes, doc.HasTrend = slope, true
	how := fmt.Sprintf("the least-squares line through %d samples over %.1f days", len(samples), doc.WindowDays)
	switch {
	case last.CapacityBytes <= 0:
		doc.Estimate = how + "; no full date: the repository's capacity is unknown (set maintenance capacity)"
	case last.StoredBytes >= last.CapacityBytes:
		doc.EstimatedFull = last.At
		doc.Estimate = "full: it stores its capacity"
	case slope <= 0:
		doc.Estimate = how + "; no full date: it does not grow"
	default:
		days := float64(last.CapacityBytes-last.StoredBytes) / slope
		doc.EstimatedFull = last.At.Add(time.Duration(days * 24 * float64(time.Hour)))
		doc.Estimate = how + "; full when the newest sample grows to the capacity at that slope"
	}
	return doc
}

// thin keeps at most max samples, evenly spread, the newest always.
func thin(samples []catalog.UsageSample, max int) []api.UsageSample {
	out := []api.UsageSample{}
	n := len(samples)
	for i := range min(n, max) {
		k := i * n / min(n, max)
		if i == min(n, max)-1 {
			k = n - 1
		}
		s := samples[k]
		out = append(out, api.UsageSample{At: s.At, StoredBytes: s.StoredBytes, CapacityBytes: s.CapacityBytes})
	}
	return out
}
