package engine

import (
	"context"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/policy"
)

// TestSchedulerAcrossDaylightSaving: with a clock the test drives, a
// policy at 02:30 in its timezone runs once on each day of 2026's
// transitions of Europe/Berlin and America/New_York: at the jump when
// 02:30 is skipped, and once when its hour repeats.
func TestSchedulerAcrossDaylightSaving(t *testing.T) {
	u := func(m time.Month, d, h, mi int) time.Time { return time.Date(2026, m, d, h, mi, 0, 0, time.UTC) }
	for _, c := range []struct {
		zone  string
		start time.Time
		want  []time.Time
	}{
		{"Europe/Berlin", u(3, 28, 12, 0), []time.Time{u(3, 29, 1, 0), u(3, 30, 0, 30)}},
		{"Europe/Berlin", u(10, 24, 12, 0), []time.Time{u(10, 25, 0, 30), u(10, 26, 1, 30)}},
		{"America/New_York", u(3, 7, 12, 0), []time.Time{u(3, 8, 7, 0), u(3, 9, 6, 30)}},
		{"America/New_York", u(10, 31, 12, 0), []time.Time{u(11, 1, 7, 30), u(11, 2, 7, 30)}},
	} {
		t.Run(c.zone+c.start.Format(" Jan"), func(t *testing.T) {
			e, clock := schedulerEnv(t, 61)
			clock.now = c.start
			p := sched("nightly", "30 2 * * *")
			p.Timezone = c.zone
			slots := make(chan time.Time, 8)
			started := make(chan *Job, 8)
			s := &Scheduler{Engine: e.eng, Policies: []policy.Policy{p}, Now: clock.Now, After: clock.After,
				Started: func(j *Job) { started <- j },
				Claim: func(_ context.Context, _ string, slot time.Time) (bool, error) {
					slots <- slot
					return true, nil
				}}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { done <- s.Run(ctx) }()
			for _, want := range c.want {
				clock.tick()
				if now := clock.Now(); !now.Equal(want) {
					t.Fatalf("woke at %s, want %s", now.UTC(), want)
				}
				if slot := <-slots; !slot.Equal(want) {
					t.Fatalf("claimed slot %s, want %s", slot.UTC(), want)
				}
				j := receive(t, started, "a run")
				if _, err := j.Wait(); err != nil {
					t.Fatal(err)
				}
			}
			cancel()
			<-clock.waits
			if err := <-done; err != context.Canceled {
				t.Fatalf("Run returned %v", err)
			}
		})
	}
}
