package maintenance

import (
	"fmt"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/schedule"
)

// Window is when maintenance may run: from Start to End (HH:MM, in
// Timezone, by default the server's) on Days (the days it opens; default
// every day). A window whose end is before its start closes the next day
// (22:00-06:00). A job does not start outside its window, and one still
// running at its end is stopped (gc and verify resume at their next
// run). On a day the clocks change, a start or end inside a skipped
// hour is the jump's instant.
type Window struct {
	Name     string   `yaml:"name"`
	Days     []string `yaml:"days"`
	Start    string   `yaml:"start"`
	End      string   `yaml:"end"`
	Timezone string   `yaml:"timezone"`
}

var weekdays = map[string]time.Weekday{
	"sunday": time.Sunday, "monday": time.Monday, "tuesday": time.Tuesday, "wednesday": time.Wednesday,
	"thursday": time.Thursday, "friday": time.Friday, "saturday": time.Saturday,
	"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
}

// clock parses HH:MM into minutes after midnight.
func clock(s string) (int, error) {
	t, err := time.Parse("15:04", s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a time of day (HH:MM, like 22:00)", s)
	}
	return t.Hour()*60 + t.Minute(), nil
}

func (w *Window) check() error {
	var errs []string
	start, err1 := clock(w.Start)
	end, err2 := clock(w.End)
	if err1 != nil {
		errs = append(errs, "start: "+err1.Error())
	}
	if err2 != nil {
		errs = append(errs, "end: "+err2.Error())
	}
	if err1 == nil && err2 == nil && start == end {
		errs = append(errs, "start and end are the same: a window that never closes is no window (leave window out)")
	}
	if _, err := schedule.Zone(w.Timezone); err != nil {
		errs = append(errs, err.Error())
	}
	for _, d := range w.Days {
		if _, ok := weekdays[strings.ToLower(d)]; !ok {
			errs = append(errs, fmt.Sprintf("days: %q is not a weekday (monday, ... or mon, ...)", d))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func (w *Window) opensOn(d time.Weekday) bool {
	if len(w.Days) == 0 {
		return true
	}
	for _, s := range w.Days {
		if weekdays[strings.ToLower(s)] == d {
			return true
		}
	}
	return false
}

// zone is the window's location for t: its Timezone, or t's own (the
// server's clock) when it has none.
func (w *Window) zone(t time.Time) *time.Location {
	if w.Timezone == "" {
		return t.Location()
	}
	loc, err := schedule.Zone(w.Timezone)
	if err != nil { // refused by check
		return t.Location()
	}
	return loc
}

// opening is the opening of the window that begins on the day of
// (y, m, d) in loc, whether that day opens or not.
func (w *Window) opening(y int, m time.Month, d int, loc *time.Location) (from, to time.Time) {
	start, _ := clock(w.Start)
	end, _ := clock(w.End)
	from = wallTime(y, m, d, start, loc)
	if end <= start {
		d++
	}
	return from, wallTime(y, m, d, end, loc)
}

// wallTime is the first instant loc's clock shows minute of the day
// (y, m, d) or later: the earlier of two in a repeated hour, the jump
// itself for a time the clocks skip.
func wallTime(y int, m time.Month, d, minute int, loc *time.Location) time.Time {
	return schedule.At(y, m, d, minute/60, minute%60, loc)
}

// Open reports whether t is within the window and, if so, when this
// opening ends.
func (w *Window) Open(t time.Time) (bool, time.Time) {
	l := t.In(w.zone(t))
	// The opening that began today, and the one that began yesterday
	// (it may still run past midnight).
	for _, back := range []int{0, 1} {
		day := time.Date(l.Year(), l.Month(), l.Day()-back, 12, 0, 0, 0, l.Location())
		if !w.opensOn(day.Weekday()) {
			continue
		}
		from, to := w.opening(day.Year(), day.Month(), day.Day(), l.Location())
		if !t.Before(from) && t.Before(to) {
			return true, to.In(t.Location())
		}
	}
	return false, time.Time{}
}

// NextOpen is the first instant at or after t at which the window is
// open (zero: never, which check prevents).
func (w *Window) NextOpen(t time.Time) time.Time {
	if open, _ := w.Open(t); open {
		return t
	}
	l := t.In(w.zone(t))
	for ahead := range 8 {
		day := time.Date(l.Year(), l.Month(), l.Day()+ahead, 12, 0, 0, 0, l.Location())
		if !w.opensOn(day.Weekday()) {
			continue
		}
		if from, _ := w.opening(day.Year(), day.Month(), day.Day(), l.Location()); !from.Before(t) {
			return from.In(t.Location())
		}
	}
	return time.Time{}
}

// String writes the window as the configuration does.
func (w *Window) String() string {
	days := "every day"
	if len(w.Days) > 0 {
		days = strings.Join(w.Days, ",")
	}
	zone := ""
	if w.Timezone != "" {
		zone = " " + w.Timezone
	}
	return fmt.Sprintf("%s %s-%s %s%s", w.Name, w.Start, w.End, days, zone)
}
