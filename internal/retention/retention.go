// Package retention decides which backup points a GFS (grandfather-father-
// son) policy keeps: the newest N, plus the newest point in each of the last
// N hours, days, ISO weeks, months and years, plus everything protected,
// plus the newest point proven to boot.
//
// It is pure logic over (time, protected) pairs; forget and the job engine
// apply its decisions to a repository.
package retention

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Policy is a set of keep rules. Zero values disable a rule; a policy with
// every rule zero keeps everything (forget refuses to run with it).
type Policy struct {
	Last    int `yaml:"keep-last" json:"keep_last,omitempty"`
	Hourly  int `yaml:"keep-hourly" json:"keep_hourly,omitempty"`
	Daily   int `yaml:"keep-daily" json:"keep_daily,omitempty"`
	Weekly  int `yaml:"keep-weekly" json:"keep_weekly,omitempty"`
	Monthly int `yaml:"keep-monthly" json:"keep_monthly,omitempty"`
	Yearly  int `yaml:"keep-yearly" json:"keep_yearly,omitempty"`
	// Within keeps everything newer than this duration before the newest point.
	Within time.Duration `yaml:"keep-within" json:"keep_within,omitempty"`
}

// Empty reports a policy without any keep rule.
func (p Policy) Empty() bool {
	return p.Last == 0 && p.Hourly == 0 && p.Daily == 0 && p.Weekly == 0 && p.Monthly == 0 && p.Yearly == 0 && p.Within == 0
}

// String renders the policy like the CLI flags.
func (p Policy) String() string {
	var parts []string
	add := func(name string, n int) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", name, n))
		}
	}
	add("last", p.Last)
	add("hourly", p.Hourly)
	add("daily", p.Daily)
	add("weekly", p.Weekly)
	add("monthly", p.Monthly)
	add("yearly", p.Yearly)
	if p.Within > 0 {
		parts = append(parts, "within="+p.Within.String())
	}
	if len(parts) == 0 {
		return "keep everything"
	}
	return "keep " + strings.Join(parts, " ")
}

// Item is one backup point to judge.
type Item struct {
	ID        string
	Time      time.Time
	Protected bool
	// BootVerified marks a point whose last boot verification passed.
	// The newest such point is always kept, so that one restore point
	// of each source is known to boot whatever the rules say.
	BootVerified bool
}

// Decision is the verdict on one item.
type Decision struct {
	Item
	Keep    bool
	Reasons []string // e.g. "last", "daily 2026-11-21", "protected"
}

// bucketRule keeps the newest item of each of its count most recent
// buckets. key names a bucket cheaply (the capacity forecast applies
// the rules after every simulated run); label names it in reasons.
type bucketRule struct {
	name  string
	count int
	key   func(time.Time) int64
	label func(time.Time) string
}

func day(t time.Time) int64 {
	y, m, d := t.Date()
	return (int64(y)*100+int64(m))*100 + int64(d)
}

// Apply judges items (any order) and returns decisions newest first. Times
// are bucketed in loc (the operator's time zone).
func Apply(p Policy, items []Item, loc *time.Location) []Decision {
	return apply(p, items, loc, true)
}

// Verdicts is Apply without the reasons: the capacity forecast judges
// the points after every run it simulates, tens of thousands of times
// for an hourly policy, where naming each bucket cost half its time.
func Verdicts(p Policy, items []Item, loc *time.Location) []Decision {
	return apply(p, items, loc, false)
}

func apply(p Policy, items []Item, loc *time.Location, explain bool) []Decision {
	out := make([]Decision, len(items))
	for i, it := range items {
		out[i] = Decision{Item: it}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.After(out[j].Time) })
	if len(out) == 0 {
		return out
	}
	if p.Empty() {
		for i := range out {
			out[i].Keep = true
			out[i].Reasons = append(out[i].Reasons, "no keep rule")
		}
		return out
	}
	rules := []bucketRule{
		{"hourly", p.Hourly, func(t time.Time) int64 { return day(t)*100 + int64(t.Hour()) },
			func(t time.Time) string { return t.Format("2006-01-02 15h") }},
		{"daily", p.Daily, day, func(t time.Time) string { return t.Format("2006-01-02") }},
		{"weekly", p.Weekly, func(t time.Time) int64 { y, w := t.ISOWeek(); return int64(y)*100 + int64(w) },
			func(t time.Time) string { y, w := t.ISOWeek(); return fmt.Sprintf("%d-W%02d", y, w) }},
		{"monthly", p.Monthly, func(t time.Time) int64 { return day(t) / 100 }, func(t time.Time) string { return t.Format("2006-01") }},
		{"yearly", p.Yearly, func(t time.Time) int64 { return int64(t.Year()) }, func(t time.Time) string { return t.Format("2006") }},
	}
	newest := out[0].Time
	proven := false
	for i := range out {
		d := &out[i]
		if d.Protected {
			d.keep("protected")
		}
		if d.BootVerified && !proven {
			proven = true
			d.keep("newest boot-verified")
		}
		if i < p.Last {
			d.keep("last")
		}
		if p.Within > 0 && !d.Time.Before(newest.Add(-p.Within)) {
			d.keep("within " + p.Within.String())
		}
	}
	// Each bucket rule keeps the newest item of each of its N most recent
	// buckets; walking newest-first, the first item seen in a bucket wins.
	local := make([]time.Time, len(out))
	for i := range out {
		local[i] = out[i].Time.In(loc)
	}
	for _, r := range rules {
		if r.count <= 0 {
			continue
		}
		seen := map[int64]bool{}
		for i := range out {
			if len(seen) >= r.count {
				break
			}
			k := r.key(local[i])
			if seen[k] {
				continue
			}
			seen[k] = true
			if explain {
				out[i].keep(r.name + " " + r.label(local[i]))
			} else {
				out[i].Keep = true
			}
		}
	}
	return out
}

func (d *Decision) keep(reason string) {
	d.Keep = true
	d.Reasons = append(d.Reasons, reason)
}
