package maintenance

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

// fakeClock hands out one timer at a time, fired by the test by hand:
// the scheduler's only timer serves schedules and windows alike.
type fakeClock struct {
	ends  chan struct{} // runs that finished
	mu    sync.Mutex
	now   time.Time
	waits chan time.Duration
	fire  chan time.Time
}

func newClock(t time.Time) *fakeClock {
	return &fakeClock{now: t, waits: make(chan time.Duration), fire: make(chan time.Time)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.waits <- d
	return c.fire
}

// tick advances the clock by what the scheduler waits for, fires its
// timer and returns the new time.
func (c *fakeClock) tick() time.Time {
	d := <-c.waits
	c.mu.Lock()
	c.now = c.now.Add(d)
	now := c.now
	c.mu.Unlock()
	c.fire <- now
	return now
}

func mustCron(t *testing.T, spec string) cron.Schedule {
	t.Helper()
	sc, err := cron.ParseStandard(spec)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

type started struct {
	job string
	run Run
	at  time.Time
}

// ended tells a test that a run finished (and the next may start).

// startScheduler runs s with the clock until the test ends; runs are
// reported on the returned channel.
func startScheduler(t *testing.T, s *Scheduler, c *fakeClock, runner func(ctx context.Context, j Job, r Run) error) <-chan started {
	t.Helper()
	runs := make(chan started, 16)
	s.Now, s.After = c.Now, c.After
	ends := make(chan struct{}, 16)
	s.Finished = func(Job, Run, error) { ends <- struct{}{} }
	c.ends = ends
	s.Runner = func(ctx context.Context, j Job, r Run) error {
		runs <- started{job: j.Name, run: r, at: c.Now()}
		if runner != nil {
			return runner(ctx, j, r)
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		for {
			select {
			case <-c.waits: // the loop waiting once more before it sees ctx end
				continue
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("Run returned %v", err)
				}
				return
			}
		}
	})
	return runs
}

// TestSchedulesFireAtTheirTimes: two jobs, each started exactly at its
// cron times, in order, with nothing started in between.
func TestSchedulesFireAtTheirTimes(t *testing.T) {
	c := newClock(time.Date(2026, 11, 23, 0, 30, 0, 0, time.UTC))
	s := &Scheduler{Jobs: []Job{
		{Name: "main/gc", Kind: "gc", Schedule: mustCron(t, "0 2 * * *")},
		{Name: "main/forget", Kind: "forget", Schedule: mustCron(t, "0 */12 * * *")},
	}}
	runs := startScheduler(t, s, c, nil)
	want := []struct {
		job string
		at  time.Time
	}{
		{"main/gc", time.Date(2026, 11, 23, 2, 0, 0, 0, time.UTC)},
		{"main/forget", time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)},
		{"main/forget", time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)},
		{"main/gc", time.Date(2026, 11, 24, 2, 0, 0, 0, time.UTC)},
	}
	for _, w := range want {
		now := c.tick()
		if !now.Equal(w.at) {
			t.Fatalf("the scheduler woke at %s, want %s", now, w.at)
		}
		r := <-runs
		if r.job != w.job || !r.run.Slot.Equal(w.at) || !r.at.Equal(w.at) {
			t.Fatalf("started %s for slot %s at %s; want %s at %s", r.job, r.run.Slot, r.at, w.job, w.at)
		}
		<-c.ends
	}
	select {
	case r := <-runs:
		t.Fatalf("unexpected run %+v", r)
	default:
	}
}

// TestWindowStopsAJobFromStarting: a gc scheduled hourly with a window
// of 01:00-03:00 starts at 01:00 and 02:00 only; the other hours are
// skipped and recorded as such.
func TestWindowStopsAJobFromStarting(t *testing.T) {
	c := newClock(time.Date(2026, 11, 23, 23, 30, 0, 0, time.UTC))
	w := &Window{Name: "night", Start: "01:00", End: "03:00"}
	var mu sync.Mutex
	var skipped []time.Time
	s := &Scheduler{Jobs: []Job{{Name: "main/gc", Kind: "gc", Schedule: mustCron(t, "0 * * * *"), Window: w}},
		Skipped: func(_ context.Context, _ Job, slot time.Time, why string) {
			mu.Lock()
			skipped = append(skipped, slot)
			mu.Unlock()
		}}
	runs := startScheduler(t, s, c, nil)
	var got []int
	for range 6 { // 00:00 .. 05:00
		if now := c.tick(); now.Hour() != 1 && now.Hour() != 2 {
			continue
		}
		r := <-runs
		got = append(got, r.run.Slot.Hour())
		if want := time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC); !r.run.WindowEnd.Equal(want) {
			t.Fatalf("run's window ends %s, want %s", r.run.WindowEnd, want)
		}
		<-c.ends
	}
	// The scheduler asks for its next timer once it has handled the last
	// tick (05:00's skip included): only then is the record complete.
	<-c.waits
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("runs at hours %v, want 1 and 2", got)
	}
	select {
	case r := <-runs:
		t.Fatalf("a run outside the window: %+v", r)
	default:
	}
	mu.Lock()
	defer mu.Unlock()
	var hours []int
	for _, sl := range skipped {
		hours = append(hours, sl.Hour())
	}
	if len(hours) != 4 || hours[0] != 0 || hours[1] != 3 || hours[2] != 4 || hours[3] != 5 {
		t.Fatalf("skipped hours %v, want 0, 3, 4, 5", hours)
	}
}

// TestWindowEndStopsARunningJob: a gc still running when its window
// closes has its context ended with ErrWindowClosed.
func TestWindowEndStopsARunningJob(t *testing.T) {
	c := newClock(time.Date(2026, 11, 23, 0, 30, 0, 0, time.UTC))
	w := &Window{Name: "night", Start: "01:00", End: "03:00"}
	stopped := make(chan error, 1)
	s := &Scheduler{Jobs: []Job{{Name: "main/gc", Kind: "gc", Schedule: mustCron(t, "0 1 * * *"), Window: w}}}
	runs := startScheduler(t, s, c, func(ctx context.Context, _ Job, _ Run) error {
		<-ctx.Done()
		stopped <- context.Cause(ctx)
		return ctx.Err()
	})
	if now := c.tick(); now.Hour() != 1 {
		t.Fatalf("woke at %s", now)
	}
	<-runs
	if now := c.tick(); now.Hour() != 3 || now.Minute() != 0 {
		t.Fatalf("the scheduler woke at %s, want the window's end at 03:00", now)
	}
	if err := <-stopped; !errors.Is(err, ErrWindowClosed) {
		t.Fatalf("the running gc was stopped by %v, want the window's end", err)
	}
}

// TestOverlappingRunIsSkipped: a run whose predecessor still goes is
// skipped, not started beside it.
func TestOverlappingRunIsSkipped(t *testing.T) {
	c := newClock(time.Date(2026, 11, 23, 0, 30, 0, 0, time.UTC))
	release := make(chan struct{})
	skips := make(chan string, 4)
	s := &Scheduler{Jobs: []Job{{Name: "main/verify", Kind: "verify", Schedule: mustCron(t, "0 * * * *")}},
		Skipped: func(_ context.Context, _ Job, _ time.Time, why string) { skips <- why }}
	runs := startScheduler(t, s, c, func(ctx context.Context, _ Job, _ Run) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	c.tick() // 01:00 starts
	<-runs
	c.tick() // 02:00: still running
	if why := <-skips; why != "the previous run is still going" {
		t.Fatalf("skip reason %q", why)
	}
	close(release)
	<-c.ends
	c.tick() // 03:00: the first run has ended, the next starts
	if r := <-runs; r.run.Slot.Hour() != 3 {
		t.Fatalf("second run at %s", r.run.Slot)
	}
	<-c.ends
}

// TestClaimedElsewhereIsNotStarted: a run another server claimed is not
// started here.
func TestClaimedElsewhereIsNotStarted(t *testing.T) {
	c := newClock(time.Date(2026, 11, 23, 0, 30, 0, 0, time.UTC))
	claims := map[string]bool{}
	s := &Scheduler{Jobs: []Job{{Name: "main/gc", Kind: "gc", Schedule: mustCron(t, "0 * * * *")}},
		Claim: func(_ context.Context, schedule string, slot time.Time) (bool, error) {
			// Another server claimed the odd hours.
			if slot.Hour()%2 == 1 {
				return false, nil
			}
			claims[schedule+slot.String()] = true
			return true, nil
		}}
	runs := startScheduler(t, s, c, nil)
	for range 4 { // 01:00 .. 04:00
		if now := c.tick(); now.Hour()%2 == 0 {
			if r := <-runs; !r.run.Slot.Equal(now) {
				t.Fatalf("run at %s, want %s", r.run.Slot, now)
			}
			<-c.ends
		}
	}
	select {
	case r := <-runs:
		t.Fatalf("a run claimed by another server started here: %+v", r)
	default:
	}
	if len(claims) != 2 {
		t.Fatalf("claims %v", claims)
	}
}
