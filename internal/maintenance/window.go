package maintenance

import (
	"fmt"
	"strings"
	"time"
)

// Window is when maintenance may run: from Start to End (HH:MM, the
// server's local time) on Days (the days it opens; default every day). A
// window whose end is before its start closes the next day (22:00-06:00).
// A job does not start outside its window, and one still running at its
// end is stopped (gc and verify resume at their next run).
type Window struct {
	Name  string   `yaml:"name"`
	Days  []string `yaml:"days"`
	Start string   `yaml:"start"`
	End   string   `yaml:"end"`
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

// Open reports whether t is within the window and, if so, when this
// opening ends.
func (w *Window) Open(t time.Time) (bool, time.Time) {
	start, _ := clock(w.Start)
	end, _ := clock(w.End)
	// The opening that began today, and the one that began yesterday
	// (it may still run past midnight).
	for _, back := range []int{0, 1} {
		day := time.Date(t.Year(), t.Month(), t.Day()-back, 0, 0, 0, 0, t.Location())
		if !w.opensOn(day.Weekday()) {
			continue
		}
		from := day.Add(time.Duration(start) * time.Minute)
		to := day.Add(time.Duration(end) * time.Minute)
		if end <= start {
			to = to.AddDate(0, 0, 1)
		}
		if !t.Before(from) && t.Before(to) {
			return true, to
		}
	}
	return false, time.Time{}
}

// String writes the window as the configuration does.
func (w *Window) String() string {
	days := "every day"
	if len(w.Days) > 0 {
		days = strings.Join(w.Days, ",")
	}
	return fmt.Sprintf("%s %s-%s %s", w.Name, w.Start, w.End, days)
}
