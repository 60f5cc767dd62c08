package maintenance

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/schedule"
)

// lastRuns is a catalog's newest claimed slot per schedule, and the
// claims made since.
type lastRuns struct {
	mu     sync.Mutex
	last   map[string]time.Time
	claims []time.Time
	taken  map[time.Time]bool // claimed by another server
}

func (l *lastRuns) lastRun(_ context.Context, schedule string) (time.Time, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.last[schedule]
	return t, ok, nil
}

func (l *lastRuns) claim(_ context.Context, _ string, slot time.Time) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.claims = append(l.claims, slot)
	return !l.taken[slot], nil
}

func at(day, hour int) time.Time { return time.Date(2026, 11, day, hour, 0, 0, 0, time.UTC) }

// TestMissedRunsOnceAtStart: a daily gc whose 03:00 run passed while
// every server was down (its last claimed run was the day before) runs
// once at start, for that slot, marked missed; then at its own times.
// With several missed slots, only the newest runs.
func TestMissedRunsOnceAtStart(t *testing.T) {
	c := newClock(at(25, 5))
	runsDB := &lastRuns{last: map[string]time.Time{"maintenance/main/gc": at(22, 3)}}
	s := &Scheduler{Jobs: []Job{{Name: "main/gc", Kind: "gc", Schedule: mustCron(t, "0 3 * * *"), Missed: MissedRunOnce}},
		LastRun: runsDB.lastRun, Claim: runsDB.claim}
	runs := startScheduler(t, s, c, nil)
	if now := c.tick(); !now.Equal(at(25, 5)) {
		t.Fatalf("the catch-up waited until %s, want the start (05:00)", now)
	}
	r := <-runs
	if !r.run.Missed || !r.run.Slot.Equal(at(25, 3)) {
		t.Fatalf("caught up %+v, want the newest missed slot 25th 03:00, marked missed", r.run)
	}
	<-c.ends
	if now := c.tick(); !now.Equal(at(26, 3)) {
		t.Fatalf("next wake %s, want the next day's 03:00", now)
	}
	if r := <-runs; r.run.Missed || !r.run.Slot.Equal(at(26, 3)) {
		t.Fatalf("second run %+v", r.run)
	}
	<-c.ends
	runsDB.mu.Lock()
	defer runsDB.mu.Unlock()
	if len(runsDB.claims) != 2 || !runsDB.claims[0].Equal(at(25, 3)) {
		t.Fatalf("claims %v: want the missed slot, then the next", runsDB.claims)
	}
}

// TestMissedSkipAndNewSchedules: missed: skip leaves the missed run, a
// schedule no server ever ran has nothing to catch up, and a missed
// slot another server claimed meanwhile is not run twice.
func TestMissedSkipAndNewSchedules(t *testing.T) {
	c := newClock(at(25, 5))
	runsDB := &lastRuns{last: map[string]time.Time{"maintenance/main/gc": at(24, 3), "maintenance/main/verify": at(24, 3)},
		taken: map[time.Time]bool{at(25, 3): true}}
	s := &Scheduler{Jobs: []Job{
		{Name: "main/gc", Kind: "gc", Schedule: mustCron(t, "0 3 * * *"), Missed: MissedSkip},
		{Name: "main/forget", Kind: "forget", Schedule: mustCron(t, "0 3 * * *"), Missed: MissedRunOnce},
		{Name: "main/verify", Kind: "verify", Schedule: mustCron(t, "0 3 * * *"), Missed: MissedRunOnce},
	}, LastRun: runsDB.lastRun, Claim: runsDB.claim}
	runs := startScheduler(t, s, c, nil)
	c.tick() // the verify's catch-up: claimed elsewhere
	if now := c.tick(); !now.Equal(at(26, 3)) {
		t.Fatalf("woke at %s, want the next regular slot", now)
	}
	got := map[string]bool{}
	for range 3 {
		r := <-runs
		if r.run.Missed || !r.run.Slot.Equal(at(26, 3)) {
			t.Fatalf("a run at start: %+v", r)
		}
		got[r.job] = true
		<-c.ends
	}
	if len(got) != 3 {
		t.Fatalf("regular runs %v", got)
	}
	select {
	case r := <-runs:
		t.Fatalf("unexpected run %+v", r)
	default:
	}
}

// TestMissedWaitsForItsWindow: a catch-up whose window is closed at
// start runs when the window opens, for the missed slot.
func TestMissedWaitsForItsWindow(t *testing.T) {
	c := newClock(at(25, 7))
	runsDB := &lastRuns{last: map[string]time.Time{"maintenance/main/gc": at(24, 3)}}
	w := &Window{Name: "night", Start: "22:00", End: "06:00"}
	s := &Scheduler{Jobs: []Job{{Name: "main/gc", Kind: "gc", Schedule: mustCron(t, "0 3 * * *"), Missed: MissedRunOnce, Window: w}},
		LastRun: runsDB.lastRun, Claim: runsDB.claim}
	runs := startScheduler(t, s, c, nil)
	if now := c.tick(); !now.Equal(at(25, 22)) {
		t.Fatalf("the catch-up ran at %s, want the window's opening at 22:00", now)
	}
	r := <-runs
	if !r.run.Missed || !r.run.Slot.Equal(at(25, 3)) || !r.run.WindowEnd.Equal(at(26, 6)) {
		t.Fatalf("caught up %+v", r.run)
	}
	<-c.ends
}

// TestSchedulerAcrossDaylightSaving: with a clock the test drives, a
// daily gc at 02:30 Europe/Berlin runs once on each day of 2026's
// transitions: at the jump (03:00 CEST) on March 29, in the first pass
// of the repeated hour on October 25; the same in America/New_York,
// whose repeated hour is 01:00-02:00 (02:30 comes once, in EST). A
// window in the same zone opens on those days at the wall times it
// names (02:00 on March 29 is the jump).
func TestSchedulerAcrossDaylightSaving(t *testing.T) {
	for _, c := range []struct {
		zone  string
		start time.Time
		want  []time.Time
	}{
		{"Europe/Berlin", time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC), []time.Time{
			time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC), time.Date(2026, 3, 30, 0, 30, 0, 0, time.UTC)}},
		{"Europe/Berlin", time.Date(2026, 10, 24, 12, 0, 0, 0, time.UTC), []time.Time{
			time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC), time.Date(2026, 10, 26, 1, 30, 0, 0, time.UTC)}},
		{"America/New_York", time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC), []time.Time{
			time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC), time.Date(2026, 3, 9, 6, 30, 0, 0, time.UTC)}},
		{"America/New_York", time.Date(2026, 10, 31, 12, 0, 0, 0, time.UTC), []time.Time{
			time.Date(2026, 11, 1, 7, 30, 0, 0, time.UTC), time.Date(2026, 11, 2, 7, 30, 0, 0, time.UTC)}},
	} {
		t.Run(c.zone+c.start.Format(" Jan"), func(t *testing.T) {
			clk := newClock(c.start)
			sc, err := schedule.Parse("30 2 * * *", c.zone)
			if err != nil {
				t.Fatal(err)
			}
			w := &Window{Name: "night", Start: "02:00", End: "04:00", Timezone: c.zone}
			s := &Scheduler{Jobs: []Job{{Name: "main/gc", Kind: "gc", Schedule: sc, Window: w}}}
			runs := startScheduler(t, s, clk, nil)
			for _, want := range c.want {
				// The scheduler may wake at the window's end first (it
				// asks while the run still goes): nothing starts then.
				for now := clk.tick(); !now.Equal(want); now = clk.tick() {
					if now.After(want) {
						t.Fatalf("woke at %s, past the run due at %s", now.UTC(), want)
					}
				}
				if r := <-runs; !r.run.Slot.Equal(want) {
					t.Fatalf("run for slot %s, want %s", r.run.Slot.UTC(), want)
				}
				<-clk.ends
			}
		})
	}
}

// TestSkippedSlotsAreClaimed: a slot skipped for its window is claimed
// like one that ran, so a restart never takes it for a missed run.
func TestSkippedSlotsAreClaimed(t *testing.T) {
	c := newClock(time.Date(2026, 11, 23, 23, 30, 0, 0, time.UTC))
	runsDB := &lastRuns{}
	skipped := make(chan time.Time, 4)
	w := &Window{Name: "night", Start: "01:00", End: "03:00"}
	s := &Scheduler{Jobs: []Job{{Name: "main/gc", Kind: "gc", Schedule: mustCron(t, "0 * * * *"), Window: w}},
		Claim: runsDB.claim, Skipped: func(_ context.Context, _ Job, slot time.Time, _ string) { skipped <- slot }}
	startScheduler(t, s, c, nil)
	c.tick() // 00:00: outside the window
	slot := <-skipped
	runsDB.mu.Lock()
	defer runsDB.mu.Unlock()
	if len(runsDB.claims) != 1 || !runsDB.claims[0].Equal(slot) {
		t.Fatalf("claims %v, want the skipped slot %s", runsDB.claims, slot)
	}
}
