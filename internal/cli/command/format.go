package command

import (
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
)

// What commands of several domains print or parse alike.

// Short is an ID's first 8 characters, as the tables print it.
func Short(s string) string {
	if len(s) > 8 {
		return s[:8]
	}
	return s
}

// Dash is s, or "-" for nothing in a table's column.
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Clip shortens s to n characters, marking the cut.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// YesNo is b in a table's column.
func YesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// Seconds turns a document's float seconds into a duration.
func Seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// ParseTags parses --tag KEY=VALUE flags (nil for none).
func ParseTags(tags []string) (map[string]string, error) {
	out := map[string]string{}
	for _, t := range tags {
		k, v, ok := strings.Cut(t, "=")
		if !ok || k == "" {
			return nil, Usagef("tag %q: want KEY=VALUE", t)
		}
		out[k] = v
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// MaxPage is the largest page of a listing the server answers (jobs,
// catalog points, a job's tasks and log lines in its document).
const MaxPage = 1000

// PrintForget prints forget's verdict per source.
func (a *App) PrintForget(sources []api.ForgetSource, dry bool) {
	for _, g := range sources {
		a.Printf("%s: keep %d, remove %d\n", g.VM, len(g.Keep), len(g.Remove))
		for _, d := range g.Remove {
			verb := "removed"
			if dry {
				verb = "would remove"
			}
			a.Printf("    %s %s %s\n", verb, Short(d.PointID), d.Time.Local().Format(time.DateTime))
		}
		for _, l := range g.Locked {
			a.Printf("    kept: %s is retained until %s\n", Short(l.PointID), l.LockedUntil.Format(time.RFC3339))
		}
	}
}
