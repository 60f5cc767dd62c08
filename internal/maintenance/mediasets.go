package maintenance

import (
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/schedule"
)

// MediaCopyJob copies points to a pool of a media library: on its
// schedule, the newest point of each source of the repository; after a
// policy's run, the points the run made. With MediaSets, a scheduled
// copy writes each run into a media set of its period (GFS, as Proxmox
// Backup Server's tape jobs rotate media sets): the run the schedule
// names first in a month goes to that month's set, else the first in a
// week (Monday to Sunday) to that week's, else to its day's, each level
// only if the rule keeps sets of it (the runs of a level not kept go to
// the next lower level kept, the lowest taking every run left). A set
// is a pool of its own, POOL-monthly-2026-12, POOL-weekly-2026-W49 or
// POOL-daily-2026-12-06, allocated (its cartridges labelled) by its first
// copy, and its volumes are protected for as many periods as the rule
// keeps sets of its level (a month counting 31 days): a set is
// overwritten, by a later set, only once it has expired.
type MediaCopyJob struct {
	Common    `yaml:",inline"`
	Library   string          `yaml:"library"`
	Pool      string          `yaml:"pool"`
	After     string          `yaml:"after"`
	MediaSets *MediaSets      `yaml:"media-sets"`
	Retention policy.Duration `yaml:"retention"`
}

// MediaSets is a GFS rule: how many sets of each period are kept.
type MediaSets struct {
	Daily   int `yaml:"daily"`
	Weekly  int `yaml:"weekly"`
	Monthly int `yaml:"monthly"`
}

// Levels of media sets.
const (
	SetDaily   = "daily"
	SetWeekly  = "weekly"
	SetMonthly = "monthly"
)

// MediaSet is the set a run lands in.
type MediaSet struct {
	// Level is daily, weekly or monthly; "" without media sets (the
	// pool itself, appended to).
	Level string
	// Pool is the pool its volumes are labelled into.
	Pool string
	// Retention protects the volumes written.
	Retention time.Duration
}

// monthDays is how long a month of a set's retention counts.
const monthDays = 31

// SetFor is the media set of j's run at slot.
func (j Job) SetFor(slot time.Time) MediaSet {
	m := j.MediaSets
	if m == (MediaSets{}) {
		return MediaSet{Pool: j.Pool, Retention: j.Retention}
	}
	loc, err := schedule.Zone(j.Zone)
	if err != nil || loc == nil {
		loc = slot.Location()
	}
	t := slot.In(loc)
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
	monday := day.AddDate(0, 0, -((int(day.Weekday()) + 6) % 7))
	month := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc)
	first := func(start time.Time) bool { // the schedule's first slot since start
		f := j.Schedule.Next(start.Add(-time.Nanosecond))
		return !f.IsZero() && !slot.After(f)
	}
	year, week := t.ISOWeek()
	monthly := MediaSet{SetMonthly, fmt.Sprintf("%s-monthly-%04d-%02d", j.Pool, t.Year(), t.Month()), time.Duration(m.Monthly) * monthDays * 24 * time.Hour}
	weekly := MediaSet{SetWeekly, fmt.Sprintf("%s-weekly-%04d-W%02d", j.Pool, year, week), time.Duration(m.Weekly) * 7 * 24 * time.Hour}
	daily := MediaSet{SetDaily, fmt.Sprintf("%s-daily-%04d-%02d-%02d", j.Pool, t.Year(), t.Month(), t.Day()), time.Duration(m.Daily) * 24 * time.Hour}
	switch {
	case m.Monthly > 0 && (first(month) || m.Weekly+m.Daily == 0):
		return monthly
	case m.Weekly > 0 && (first(monday) || m.Daily == 0):
		return weekly
	}
	return daily
}

// mediaCopyJobs resolves a repository's media-copy jobs.
func mediaCopyJobs(r Repository, where string, engine *policy.Config, job jobMaker, add func(string, ...any)) []Job {
	var jobs []Job
	seen := map[string]bool{}
	for _, mc := range r.MediaCopy {
		name := "media-copy:" + mc.Library + "/" + mc.Pool
		if mc.After != "" {
			name += "/after:" + mc.After
		}
		j, ok := scheduleOrAfter(r, where, name, "media-copy", mc.Common, mc.After, engine, job, add)
		j.Library, j.Pool, j.Retention = mc.Library, mc.Pool, time.Duration(mc.Retention)
		if mc.MediaSets != nil {
			j.MediaSets = *mc.MediaSets
		}
		m := j.MediaSets
		_, known := engine.MediaLibrary(mc.Library)
		switch {
		case mc.Library == "":
			add("%s: media-copy: library is missing (a media-libraries entry)", where)
			ok = false
		case !known:
			add("%s: media-copy: unknown media library %q", where, mc.Library)
			ok = false
		case mc.Pool == "":
			add("%s: %s: pool is missing (the media pool its volumes are labelled into)", where, name)
			ok = false
		case seen[name]:
			add("%s: %s is given twice", where, name)
			ok = false
		case m.Daily < 0 || m.Weekly < 0 || m.Monthly < 0:
			add("%s: %s: media-sets: the sets kept of each level are counted from 0", where, name)
			ok = false
		case mc.MediaSets != nil && m == (MediaSets{}):
			add("%s: %s: media-sets: keep sets of at least one level (daily, weekly, monthly)", where, name)
			ok = false
		case mc.MediaSets != nil && mc.After != "":
			add("%s: %s: media-sets follow the job's schedule (the first run of a month is its monthly set): give a schedule instead of after, or leave media-sets out", where, name)
			ok = false
		case mc.MediaSets != nil && mc.Retention != 0:
			add("%s: %s: retention: media sets are kept as media-sets says (daily: 7 keeps a daily set 7 days): leave retention out", where, name)
			ok = false
		}
		seen[name] = true
		if ok {
			jobs = append(jobs, j)
		}
	}
	return jobs
}
