package policy

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/coffer-backup/coffer/internal/schedule"
)

// weekdays maps "sunday" and "sun" (any case after lowering) to days.
var weekdays = func() map[string]time.Weekday {
	m := map[string]time.Weekday{}
	for d := time.Sunday; d <= time.Saturday; d++ {
		name := strings.ToLower(d.String())
		m[name], m[name[:3]] = d, d
	}
	return m
}()

// Point is what mode decisions need to know of an earlier backup point.
type Point struct {
	Time time.Time
	Mode string // full, incremental, differential
}

// ModeFor decides the backup mode of one VM for a run starting at now,
// given the VM's earlier points (any order), and says why:
//
//   - mode: full, or no full point yet -> full;
//   - the run's weekday (in now's location) is in full-on and no full was
//     taken that day -> full;
//   - full-every N and N-1 points since the last full -> full (a cycle of N
//     runs: one full, then N-1 others);
//   - otherwise the policy's mode (incremental by default).
func (p Policy) ModeFor(now time.Time, history []Point) (mode, reason string) {
	mode = p.Mode
	if mode == "" {
		mode = "incremental"
	}
	if mode == "full" {
		return "full", "policy mode"
	}
	var lastFull time.Time
	since := 0
	for _, h := range history {
		if h.Mode == "full" && h.Time.After(lastFull) {
			lastFull = h.Time
		}
	}
	if lastFull.IsZero() {
		return "full", "no full backup yet"
	}
	for _, h := range history {
		if h.Time.After(lastFull) {
			since++
		}
	}
	for _, d := range p.FullOn {
		if weekdays[strings.ToLower(d)] != now.Weekday() {
			continue
		}
		ly, lm, ld := lastFull.In(now.Location()).Date()
		if y, m, dd := now.Date(); y != ly || m != lm || dd != ld {
			return "full", "full on " + strings.ToLower(now.Weekday().String())
		}
	}
	if p.FullEvery > 0 && since+1 >= p.FullEvery {
		return "full", fmt.Sprintf("one run in %d is full (%d since the last)", p.FullEvery, since)
	}
	return mode, ""
}

// ParseSchedule parses the policy's cron schedule in its time zone (nil
// when unscheduled).
func (p Policy) ParseSchedule() (cron.Schedule, error) {
	if p.Schedule == "" {
		return nil, nil
	}
	return schedule.Parse(p.Schedule, p.Timezone)
}
