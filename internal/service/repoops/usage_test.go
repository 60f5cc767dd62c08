package repoops

import (
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// usageTrend on samples made from a known growth: the trend is that
// growth, and the full date is when the newest sample reaches the
// capacity at it; too little history, no growth and no capacity give no
// date, and say why.
func TestUsageTrend(t *testing.T) {
	start := time.Date(2026, 3, 1, 6, 0, 0, 0, time.UTC)
	const perDay, capacity = int64(3 << 30), int64(500 << 30)
	linear := func(n int, every time.Duration, growth int64, capacity int64) []catalog.UsageSample {
		var out []catalog.UsageSample
		for i := range n {
			at := start.Add(time.Duration(i) * every)
			out = append(out, catalog.UsageSample{Repository: "r", At: at,
				StoredBytes: 100<<30 + int64(float64(growth)*at.Sub(start).Hours()/24), CapacityBytes: capacity})
		}
		return out
	}

	s := linear(200, 6*time.Hour, perDay, capacity)
	u := usageTrend(s)
	last := s[len(s)-1]
	want := last.At.Add(time.Duration(float64(capacity-last.StoredBytes) / float64(perDay) * 24 * float64(time.Hour)))
	if !u.HasTrend || u.GrowthPerDayBytes < float64(perDay)-1 || u.GrowthPerDayBytes > float64(perDay)+1 {
		t.Fatalf("trend %.0f B/day, want %d", u.GrowthPerDayBytes, perDay)
	}
	if d := u.EstimatedFull.Sub(want); d < -time.Minute || d > time.Minute {
		t.Fatalf("estimated full %s, want %s", u.EstimatedFull, want)
	}
	if len(u.Samples) != usageShown || !u.Samples[len(u.Samples)-1].At.Equal(last.At) || !u.Samples[0].At.Equal(s[0].At) {
		t.Fatalf("thinned to %d samples from %s to %s", len(u.Samples), u.Samples[0].At, u.Samples[len(u.Samples)-1].At)
	}

	for _, c := range []struct {
		name    string
		samples []catalog.UsageSample
		says    string
	}{
		{"two samples", linear(2, 48*time.Hour, perDay, capacity), "not enough history"},
		{"half a day", linear(10, time.Hour, perDay, capacity), "not enough history"},
		{"shrinking", linear(10, 12*time.Hour, -perDay, capacity), "does not grow"},
		{"no capacity", linear(10, 12*time.Hour, perDay, 0), "capacity is unknown"},
	} {
		u := usageTrend(c.samples)
		if !u.EstimatedFull.IsZero() || !strings.Contains(u.Estimate, c.says) {
			t.Errorf("%s: estimated full %s, %q", c.name, u.EstimatedFull, u.Estimate)
		}
	}
}
