// Package schedule reads the cron schedules of policies and maintenance
// jobs, each in a time zone (timezone:, by default the server's), and
// gives their runs across daylight saving changes one rule:
//
//   - a run inside a skipped hour (the clocks jump forward) runs once,
//     at the jump: runs of several skipped times and the one of the
//     time the clocks jump to are one run;
//   - an hour that repeats (the clocks go back) runs once: its runs
//     happen in its first pass, and the second pass runs nothing.
//
// cron (robfig/cron) does neither by itself in a zone with daylight
// saving: it drops a skipped run and makes a repeated one twice. So the
// cron fields are matched against the zone's wall clock as if it were
// UTC (no changes), and each wall-clock time is then placed at the first
// instant the zone's clock reaches it. `@every` schedules count elapsed
// time, not the clock, and are the same in every zone.
package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	// The zones are in the binary: a timezone: reads the same on a host
	// without a zoneinfo database (a minimal container image).
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
)

// Zone resolves a timezone: value: an IANA zone name (Europe/Berlin,
// America/New_York, UTC), or "" for the server's zone (time.Local).
func Zone(name string) (*time.Location, error) {
	if name == "" || name == "Local" {
		return time.Local, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil || strings.HasPrefix(name, "/") || strings.Contains(name, "..") {
		return nil, fmt.Errorf("timezone %q is not a known time zone (an IANA name like Europe/Berlin, America/New_York or UTC)", name)
	}
	return loc, nil
}

// Parse reads a cron schedule ("0 22 * * *", @daily, @every 6h) whose
// times are in zone ("": the server's). The error says what to write.
func Parse(spec, zone string) (cron.Schedule, error) {
	loc, err := Zone(zone)
	if err != nil {
		return nil, err
	}
	return ParseIn(spec, loc)
}

// ParseIn is Parse with the zone already resolved.
func ParseIn(spec string, loc *time.Location) (sc cron.Schedule, err error) {
	trimmed := strings.TrimSpace(spec)
	if strings.HasPrefix(trimmed, "TZ=") || strings.HasPrefix(trimmed, "CRON_TZ=") {
		return nil, errors.New("a zone in the schedule is not read here: write it in timezone: (like timezone: Europe/Berlin)")
	}
	defer func() { // the cron parser panics on a few odd inputs
		if r := recover(); r != nil {
			sc, err = nil, fmt.Errorf("%v", r)
		}
	}()
	sc, err = cron.ParseStandard(trimmed)
	if err != nil {
		return nil, err
	}
	spec2, ok := sc.(*cron.SpecSchedule)
	if !ok { // @every: elapsed time, the same in every zone
		return sc, nil
	}
	spec2.Location = time.UTC // the wall clock, without changes
	return &Zoned{wall: spec2, loc: loc}, nil
}

// Zoned is a cron schedule in a time zone, with the rule of the package
// for daylight saving changes.
type Zoned struct {
	wall cron.Schedule // matched against wall-clock times written as UTC
	loc  *time.Location
}

// Location is the schedule's zone.
func (z *Zoned) Location() *time.Location { return z.loc }

// Next is the first run after t (zero: none within five years), in t's
// location.
func (z *Zoned) Next(t time.Time) time.Time {
	w := z.wall.Next(z.reached(t))
	if w.IsZero() {
		return w
	}
	return z.first(w).In(t.Location())
}

// wallOf writes t's wall-clock time in the zone as a UTC time.
func (z *Zoned) wallOf(t time.Time) time.Time {
	l := t.In(z.loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
}

// reached is the latest wall-clock time the zone's clock has shown up to
// t: t's own, except in the second pass of a repeated hour, where it is
// the time shown just before the clocks went back (so the repeated
// times are not run again).
func (z *Zoned) reached(t time.Time) time.Time {
	l := t.In(z.loc)
	start, _ := l.ZoneBounds()
	if start.IsZero() {
		return z.wallOf(t)
	}
	before := start.Add(-time.Nanosecond)
	_, was := before.In(z.loc).Zone()
	_, is := l.Zone()
	if was > is && t.Before(start.Add(time.Duration(was-is)*time.Second)) {
		return z.wallOf(before)
	}
	return z.wallOf(t)
}

// At is the first instant at which loc's clock shows the time of day
// hour:minute on the date y-m-d: the earlier of two in a repeated hour,
// the jump itself for a time the clocks skip. (time.Date leaves both
// cases unspecified.) Maintenance windows open and close by it.
func At(y int, m time.Month, d, hour, minute int, loc *time.Location) time.Time {
	return (&Zoned{loc: loc}).first(time.Date(y, m, d, hour, minute, 0, 0, time.UTC))
}

// first is the first instant at which the zone's clock reaches the wall
// time w: w's own instant, the earlier of two in a repeated hour, or the
// jump itself when w is skipped.
func (z *Zoned) first(w time.Time) time.Time {
	base := w.Unix()
	var found time.Time
	var offsets []int
	for _, probe := range []int64{base - 86400, base + 86400} {
		_, off := time.Unix(probe, 0).In(z.loc).Zone()
		offsets = append(offsets, off)
		c := time.Unix(base-int64(off), int64(w.Nanosecond()))
		if z.wallOf(c).Equal(w) && (found.IsZero() || c.Before(found)) {
			found = c
		}
	}
	if !found.IsZero() {
		return found
	}
	// Skipped: with the offset before the jump, w falls after it; the
	// jump is the start of the zone period that instant is in.
	after := time.Unix(base-int64(offsets[0]), 0).In(z.loc)
	start, _ := after.ZoneBounds()
	if start.IsZero() {
		return after
	}
	return start
}
