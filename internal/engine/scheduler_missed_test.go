package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/fake"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
)

// TestSchedulerRecordsMissedSlotsAndSkipsAResumedRun: a scheduler taking
// the schedules over at 23:30, whose catalog's newest claimed slot of an
// hourly policy is 21:00, records the 22:00 and 23:00 slots as one skipped
// run (claiming 23:00), naming the resumed run of the interrupted job;
// its 00:00 slot skips while that run goes, claimed too, and its 01:00
// slot runs once it ended. A second scheduler finding 23:00 claimed
// records nothing.
func TestSchedulerRecordsMissedSlotsAndSkipsAResumedRun(t *testing.T) {
	release := make(chan struct{})
	e := newEnv(t, fake.Options{Seed: 34, VMs: 1}, nil, func(o *Options) {
		o.OpenRepository = nil
		o.Runner = func(ctx context.Context, _ *repo.Writer, _ hypervisor.Connector, _ backup.VMRequest, _ backup.Options) (*repo.Point, error) {
			<-release
			return &repo.Point{Mode: "full"}, nil
		}
	})
	hourly := testPolicy("hourly")
	hourly.Schedule = "0 * * * *"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resumed, err := e.eng.Start(ctx, hourly)
	if err != nil {
		t.Fatal(err)
	}
	cl := &fakeClaims{claims: map[time.Time]bool{time.Date(2026, 11, 23, 21, 0, 0, 0, time.UTC): true}}
	claims, claim, lastRun := cl.claims, cl.claim, cl.lastRun
	clock := &fakeClock{now: time.Date(2026, 11, 23, 23, 30, 0, 0, time.UTC), waits: make(chan time.Duration), fire: make(chan time.Time)}
	started := make(chan *Job, 2)
	s := &Scheduler{Engine: e.eng, Policies: []policy.Policy{hourly}, Now: clock.Now, After: clock.After, Claim: claim, LastRun: lastRun,
		Running: func(name string) Resumed {
			if name != "hourly" {
				return Resumed{}
			}
			return Resumed{Job: resumed, Resumes: 7}
		},
		Started: func(j *Job) { started <- j }}
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	clock.tick() // 00:00: the resumed run still goes
	// The next wait is asked once the 00:00 slot was handled; then the
	// resumed run may end.
	d := <-clock.waits
	close(release)
	if res, _ := resumed.Wait(); res.Job.Status != catalog.StatusSuccess {
		t.Fatalf("the resumed run: %s", res.Job.Status)
	}
	clock.mu.Lock()
	clock.now = clock.now.Add(d)
	clock.mu.Unlock()
	clock.fire <- clock.Now() // 01:00: runs
	(<-started).Wait()
	cancel()
	<-clock.waits
	if err := <-done; err != context.Canceled {
		t.Fatalf("Run returned %v", err)
	}

	jobs, _ := e.cat.ListJobs(context.Background(), catalog.JobFilter{Policy: "hourly", Status: catalog.StatusCancelled})
	want := map[time.Time]string{
		time.Date(2026, 11, 23, 23, 0, 0, 0, time.UTC): fmt.Sprintf("skipped: 2 scheduled run(s) of policy hourly, from 2026-11-23T22:00:00Z "+
			"to 2026-11-23T23:00:00Z, came while no server ran the schedules; the run of job 7, interrupted with its server, goes on as job %d", resumed.ID()),
		time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC): fmt.Sprintf("skipped: the previous run of policy hourly (job %d) is still running", resumed.ID()),
	}
	if len(jobs) != len(want) {
		t.Fatalf("%d skipped runs, want %d: %+v", len(jobs), len(want), jobs)
	}
	for _, j := range jobs {
		if want[j.CreatedAt] != j.Error || len(e.cat.EventsOf(j.ID, "skipped")) != 1 {
			t.Errorf("skipped run at %s: %q, want %q", j.CreatedAt, j.Error, want[j.CreatedAt])
		}
	}
	for _, slot := range []time.Time{time.Date(2026, 11, 23, 23, 0, 0, 0, time.UTC), time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC)} {
		if !claims[slot] {
			t.Errorf("slot %s not claimed", slot)
		}
	}

	// Another server taking over later finds the missed slots claimed.
	again := &Scheduler{Engine: e.eng, Policies: []policy.Policy{hourly}, Claim: claim,
		LastRun: func(context.Context, string) (time.Time, bool, error) {
			return time.Date(2026, 11, 23, 21, 0, 0, 0, time.UTC), true, nil
		}}
	list, err := plan(again.Policies, nil, time.Date(2026, 11, 23, 23, 40, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	again.recordMissed(context.Background(), list, time.Date(2026, 11, 23, 23, 40, 0, 0, time.UTC))
	if after, _ := e.cat.ListJobs(context.Background(), catalog.JobFilter{Policy: "hourly", Status: catalog.StatusCancelled}); len(after) != len(jobs) {
		t.Errorf("a second server recorded the claimed missed slots again: %d skipped runs", len(after))
	}
}

// fakeClaims are the catalog's claims of policy/hourly's slots.
type fakeClaims struct {
	mu     sync.Mutex
	claims map[time.Time]bool
}

func (c *fakeClaims) claim(_ context.Context, schedule string, slot time.Time) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if schedule != "policy/hourly" || c.claims[slot] {
		return false, nil
	}
	c.claims[slot] = true
	return true, nil
}

func (c *fakeClaims) lastRun(_ context.Context, schedule string) (time.Time, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var last time.Time
	for slot := range c.claims {
		if slot.After(last) {
			last = slot
		}
	}
	return last, schedule == "policy/hourly", nil
}
