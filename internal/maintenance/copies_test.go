package maintenance

import (
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/coffer-backup/coffer/internal/schedule"
)

func mustZoned(t *testing.T, spec, zone string) cron.Schedule {
	t.Helper()
	sc, err := schedule.Parse(spec, zone)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestCopyAfterAPolicy: a copy and a media copy with after: follow the
// policy's runs (no schedule); a copy after a policy of another
// repository, an unknown policy, or after: with a schedule, is refused
// naming what to change.
func TestCopyAfterAPolicy(t *testing.T) {
	lib := "\nmedia-libraries: [{name: tapes, kind: vtl, directory: /srv/vtl}]\n"
	c, eng, err := load(t, engine+lib+`
maintenance:
  repositories:
    - repository: main
      copy: [{to: offsite, schedule: "0 4 * * *"}, {to: offsite, after: nightly}]
      media-copy: [{library: tapes, pool: p, after: nightly, retention: 30d}]
`)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := c.Jobs(eng)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range After(jobs, "nightly") {
		names = append(names, j.Name)
		if j.Schedule != nil || j.Window != nil {
			t.Fatalf("%s follows a policy but has a schedule or window", j.Name)
		}
	}
	if got := strings.Join(names, " "); got != "main/copy:offsite/after:nightly main/media-copy:tapes/p/after:nightly" {
		t.Fatalf("jobs after nightly: %s", got)
	}
	if n := len(Scheduled(jobs)); n != 1 {
		t.Fatalf("%d scheduled jobs, want the one copy with a schedule", n)
	}
	for doc, want := range map[string]string{
		`copy: [{to: offsite, after: other}]`:                                             "policy other writes to repository default, not main",
		`copy: [{to: offsite, after: nope}]`:                                              `after: unknown policy "nope"`,
		`copy: [{to: offsite, after: nightly, schedule: "@daily"}]`:                       "leave schedule, timezone, window and missed out",
		`media-copy: [{library: tapes, pool: p, after: nightly, media-sets: {daily: 2}}]`: "media-sets follow the job's schedule",
		`media-copy: [{library: nope, pool: p, schedule: "@daily"}]`:                      `unknown media library "nope"`,
		`media-copy: [{library: tapes, pool: p, schedule: "@daily", media-sets: {}}]`:     "keep sets of at least one level",
	} {
		c, eng, err := load(t, engine+lib+"maintenance:\n  repositories:\n    - repository: main\n      "+doc+"\n")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Jobs(eng); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", doc, err, want)
		}
	}
}

// TestMediaSetsRotateByGFS: a daily media copy keeping daily, weekly
// and monthly sets writes the month's first run to the monthly set, each
// other week's first run (Monday) to that week's, and the rest to their
// day's, each set protected for as many periods as it is kept; with
// only weekly and monthly sets kept, the other days append to the
// week's set.
func TestMediaSetsRotateByGFS(t *testing.T) {
	job := func(sets MediaSets) Job {
		return Job{Pool: "off", Zone: "Europe/Berlin", MediaSets: sets, Schedule: mustZoned(t, "0 5 * * *", "Europe/Berlin")}
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	at := func(m time.Month, d int) time.Time { return time.Date(2026, m, d, 5, 0, 0, 0, berlin) }
	full := job(MediaSets{Daily: 6, Weekly: 4, Monthly: 12})
	for _, c := range []struct {
		slot time.Time
		want string
		keep time.Duration
	}{
		{at(11, 30), "off-weekly-2026-W49", 4 * 7 * 24 * time.Hour}, // a Monday
		{at(12, 1), "off-monthly-2026-12", 12 * 31 * 24 * time.Hour},
		{at(12, 2), "off-daily-2026-12-02", 6 * 24 * time.Hour},
		{at(12, 6), "off-daily-2026-12-06", 6 * 24 * time.Hour}, // a Sunday
		{at(12, 7), "off-weekly-2026-W50", 4 * 7 * 24 * time.Hour},
	} {
		if got := full.SetFor(c.slot); got.Pool != c.want || got.Retention != c.keep {
			t.Errorf("%s: set %s kept %s, want %s kept %s", c.slot, got.Pool, got.Retention, c.want, c.keep)
		}
	}
	noDaily := job(MediaSets{Weekly: 2, Monthly: 3})
	if got := noDaily.SetFor(at(12, 2)).Pool; got != "off-weekly-2026-W49" {
		t.Errorf("without daily sets, 2 December goes to %s, want the week's set", got)
	}
	if got := job(MediaSets{}).SetFor(at(12, 2)); got.Pool != "off" || got.Level != "" {
		t.Errorf("without media sets, the run goes to %+v, want the pool itself", got)
	}
}

// TestSchedulerFollowsUpdates: a job added by a reload is scheduled
// from then on, an unchanged one keeps its slot, a removed one stops.
func TestSchedulerFollowsUpdates(t *testing.T) {
	c := newClock(time.Date(2026, 11, 23, 0, 30, 0, 0, time.UTC))
	updates := make(chan []Job)
	gc := Job{Name: "main/gc", Kind: "gc", Spec: "0 2 * * *", Schedule: mustCron(t, "0 2 * * *")}
	s := &Scheduler{Jobs: []Job{gc}, Updates: updates}
	runs := startScheduler(t, s, c, nil)
	<-c.waits // waiting for 02:00
	verify := Job{Name: "main/verify", Kind: "verify", Spec: "0 1 * * *", Schedule: mustCron(t, "0 1 * * *")}
	updates <- []Job{gc, verify}
	for _, want := range []string{"main/verify", "main/gc"} {
		c.tick()
		if r := <-runs; r.job != want {
			t.Fatalf("started %s, want %s", r.job, want)
		}
		<-c.ends
	}
	<-c.waits
	updates <- []Job{verify}
	for range 2 {
		c.tick()
		if r := <-runs; r.job != "main/verify" {
			t.Fatalf("started %s after gc was removed", r.job)
		}
		<-c.ends
	}
}
