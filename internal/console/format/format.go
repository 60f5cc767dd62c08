// Package format writes the console's numbers and times as its pages
// show them: durations, times, shares, a job's status as a CSS class.
package format

import (
	"fmt"
	"github.com/coffer-backup/coffer/internal/config"
	"html/template"
	"math"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
)

// Ago says how long ago t was, in the largest unit that fits.
func Ago(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return Duration(time.Since(t).Seconds()) + " ago"
}

// Duration says a number of seconds briefly: 45s, 3m 12s, 2h 5m, 3d 4h.
func Duration(s float64) string {
	if s < 0 || math.IsNaN(s) || math.IsInf(s, 0) {
		return "—"
	}
	d := time.Duration(s * float64(time.Second)).Round(time.Second)
	switch {
	case s > 0 && d == 0:
		return "under 1s" // not "0s": something took time
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%dh", int(d.Hours()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", int(d.Hours())/24)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}

// When is a time as operators read it: local date and time to the second.
func When(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// Percent is done's share of total, 0 to 100.
func Percent(done, total int64) int {
	if total <= 0 {
		return 0
	}
	return int(math.Min(100, float64(done)*100/float64(total)))
}

// StatusClass is the CSS class of a job's status.
func StatusClass(s string) string {
	switch s {
	case "success":
		return "ok"
	case "failed":
		return "bad"
	case "partial", "cancelled":
		return "warn"
	}
	return "busy"
}

// SignedShare writes a signed fraction as a whole percentage with its
// sign (+12%, -3%): a run's error against its prediction.
func SignedShare(f float64) string {
	if math.Round(f*100) == 0 {
		return "0%"
	}
	return fmt.Sprintf("%+.0f%%", f*100)
}

// Share writes a fraction (0 to 1) as a whole percentage.
func Share(f float64) string { return strconv.FormatFloat(f*100, 'f', 0, 64) + "%" }

// Sparkline draws stored bytes over time, in a 200×40 box, scaled to the
// samples' own range (the shape of the growth; the figures say the sizes).
func Sparkline(ss []api.UsageSample) string {
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

// Funcs are the functions the console's templates call.
var Funcs = template.FuncMap{
	"bytes":       config.HumanBytes,
	"ago":         Ago,
	"dur":         Duration,
	"when":        When,
	"pct":         Percent,
	"share":       Share,
	"signed":      SignedShare,
	"add":         func(a, b int) int { return a + b },
	"esc":         url.PathEscape,
	"short":       func(s string) string { return s[:min(len(s), 8)] },
	"join":        strings.Join,
	"split":       strings.Fields,
	"dirname":     func(p string) string { return path.Dir(p) },
	"status":      StatusClass,
	"rate":        func(f float64) string { return config.HumanBytes(int64(f)) + "/s" },
	"size":        func(f float64) string { return config.HumanBytes(int64(f)) },
	"consistency": api.Consistency,
}
