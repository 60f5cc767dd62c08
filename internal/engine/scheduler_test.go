package engine

import (
	"context"
	"strings"
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

// fakeClock hands out timer channels the test fires by hand.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	waits chan time.Duration
	fire  chan time.Time
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

// tick advances the clock by the duration the scheduler waits for and
// fires its timer.
func (c *fakeClock) tick() {
	d := <-c.waits
	c.mu.Lock()
	c.now = c.now.Add(d)
	now := c.now
	c.mu.Unlock()
	c.fire <- now
}

func TestSchedulerRunsOnScheduleAndSkipsOverlaps(t *testing.T) {
	release := make(chan struct{})
	e := newEnv(t, fake.Options{Seed: 31, VMs: 1}, nil, func(o *Options) {
		o.OpenRepository = nil
		o.Runner = func(ctx context.Context, _ *repo.Writer, _ hypervisor.Connector, _ backup.VMRequest, _ backup.Options) (*repo.Point, error) {
			<-release
			return &repo.Point{Mode: "full"}, nil
		}
	})
	clock := &fakeClock{now: time.Date(2026, 11, 23, 21, 59, 30, 0, time.UTC), waits: make(chan time.Duration), fire: make(chan time.Time)}
	hourly := testPolicy("hourly")
	hourly.Schedule = "0 * * * *"
	unscheduled := testPolicy("manual")
	started := make(chan *Job, 4)
	s := &Scheduler{Engine: e.eng, Policies: []policy.Policy{hourly, unscheduled}, Now: clock.Now, After: clock.After,
		Started: func(j *Job) { started <- j }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()

	clock.tick() // 22:00
	first := <-started
	if first.Policy().Name != "hourly" || !clock.Now().Equal(time.Date(2026, 11, 23, 22, 0, 0, 0, time.UTC)) {
		t.Fatalf("first run %s at %s", first.Policy().Name, clock.Now())
	}
	clock.tick() // 23:00, the 22:00 run is still going
	clock.tick() // 00:00, still going: a second skip
	close(release)
	res, _ := first.Wait()
	if res.Job.Status != catalog.StatusSuccess {
		t.Fatalf("first run %s: %s", res.Job.Status, res.Job.Error)
	}
	clock.tick() // 01:00: runs again
	second := <-started
	second.Wait()
	cancel()
	<-clock.waits // the loop waits for the next hour, then sees ctx end
	if err := <-done; err != context.Canceled {
		t.Fatalf("Run returned %v", err)
	}
	jobs, _ := e.cat.ListJobs(context.Background(), catalog.JobFilter{Policy: "hourly"})
	var skipped int
	for _, j := range jobs {
		if j.Status == catalog.StatusCancelled {
			skipped++
			if ev := e.cat.EventsOf(j.ID, "skipped"); len(ev) != 1 {
				t.Errorf("skip job %d has %d skipped events", j.ID, len(ev))
			}
		}
	}
	if len(jobs) != 4 || skipped != 2 {
		t.Fatalf("%d jobs, %d skipped; want 2 runs and 2 skips", len(jobs), skipped)
	}
}

func TestSchedulerRejectsBadCron(t *testing.T) {
	e := newEnv(t, fake.Options{Seed: 32, VMs: 1}, nil, nil)
	p := testPolicy("bad")
	p.Schedule = "every tuesday"
	if err := (&Scheduler{Engine: e.eng, Policies: []policy.Policy{p}}).Run(context.Background()); err == nil {
		t.Fatal("bad schedule accepted")
	}
}

// TestSlotsShowWhatIsInUse: while VM tasks hold their slots, Slots shows
// them in use in the global, host and datastore pools with their sizes;
// when the job ends every pool is free again.
func TestSlotsShowWhatIsInUse(t *testing.T) {
	release := make(chan struct{})
	running := make(chan struct{}, 8)
	e := newEnv(t, fake.Options{Seed: 33, VMs: 4, Hosts: 1, Datastores: 1}, &policy.Config{Limits: policy.Limits{Tasks: 3, PerDatastore: 2}},
		func(o *Options) {
			o.OpenRepository = nil
			o.Runner = func(ctx context.Context, _ *repo.Writer, _ hypervisor.Connector, _ backup.VMRequest, _ backup.Options) (*repo.Point, error) {
				running <- struct{}{}
				<-release
				return &repo.Point{Mode: "full"}, nil
			}
		})
	j, err := e.eng.Start(context.Background(), testPolicy("p"))
	if err != nil {
		t.Fatal(err)
	}
	<-running
	<-running // the datastore's two slots are taken
	pools := map[string]Slot{}
	for _, s := range e.eng.Slots() {
		pools[s.Key] = s
	}
	if g := pools["global"]; g.InUse != 2 || g.Size != 3 {
		t.Errorf("global pool %+v, want 2 of 3 in use", g)
	}
	var ds *Slot
	for k, s := range pools {
		if strings.HasPrefix(k, "datastore:") {
			ds = &s
		}
	}
	if ds == nil || ds.InUse != 2 || ds.Size != 2 {
		t.Errorf("datastore pool %+v, want 2 of 2 in use (pools %v)", ds, pools)
	}
	close(release)
	if _, err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	for _, s := range e.eng.Slots() {
		if s.InUse != 0 {
			t.Errorf("pool %s still has %d slots in use", s.Key, s.InUse)
		}
	}
}

// schedulerEnv is an engine whose VM backups succeed at once, and a hand-
// driven clock at 21:59:30 on 23 November 2026, for the tests of the
// scheduler.
func schedulerEnv(t *testing.T, seed uint64) (*env, *fakeClock) {
	t.Helper()
	e := newEnv(t, fake.Options{Seed: seed, VMs: 1}, nil, func(o *Options) {
		o.OpenRepository = nil
		o.Runner = func(context.Context, *repo.Writer, hypervisor.Connector, backup.VMRequest, backup.Options) (*repo.Point, error) {
			return &repo.Point{Mode: "full"}, nil
		}
	})
	clock := &fakeClock{now: time.Date(2026, 11, 23, 21, 59, 30, 0, time.UTC), waits: make(chan time.Duration), fire: make(chan time.Time)}
	return e, clock
}

// sched is a policy on a cron schedule.
func sched(name, cron string) policy.Policy {
	p := testPolicy(name)
	p.Schedule = cron
	return p
}

// TestSchedulerClaimsRunsAcrossUpdates: with Claim (several servers on one
// catalog), every run is claimed by its policy's schedule name at the
// slot its schedule named, not at the time the timer fired, before and
// after an update; a run claimed elsewhere does not start; a run that
// starts names its slot in its log.
func TestSchedulerClaimsRunsAcrossUpdates(t *testing.T) {
	e, clock := schedulerEnv(t, 43)
	at := func(h, m int) time.Time { return time.Date(2026, 11, 23, h, m, 0, 0, time.UTC) }
	type claim struct {
		schedule string
		slot     time.Time
	}
	var mu sync.Mutex
	var claims []claim
	elsewhere := claim{"policy/half", at(22, 30)} // another server ran it
	updates := make(chan []policy.Policy)
	started := make(chan *Job, 8)
	s := &Scheduler{Engine: e.eng, Policies: []policy.Policy{sched("hourly", "0 * * * *")}, Updates: updates,
		Now: clock.Now, After: clock.After, Started: func(j *Job) { started <- j },
		Claim: func(_ context.Context, schedule string, slot time.Time) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			c := claim{schedule, slot}
			claims = append(claims, c)
			return c != elsewhere, nil
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	// late fires the scheduler's timer late by lag, as a busy host does.
	late := func(lag time.Duration) {
		d := <-clock.waits
		clock.mu.Lock()
		clock.now = clock.now.Add(d + lag)
		now := clock.now
		clock.mu.Unlock()
		clock.fire <- now
	}
	ran := func(policy string, slot time.Time) {
		t.Helper()
		j := receive(t, started, "a run")
		res, _ := j.Wait()
		if j.Policy().Name != policy {
			t.Fatalf("run of %s, want %s", j.Policy().Name, policy)
		}
		ev := e.cat.EventsOf(res.Job.ID, "scheduled")
		if want := slot.Format(time.RFC3339); len(ev) != 1 || ev[0].Fields["slot"] != want {
			t.Fatalf("job %d of %s logs its slot as %+v, want %s", res.Job.ID, policy, ev, want)
		}
	}

	late(7 * time.Second) // 22:00:07
	ran("hourly", at(22, 0))
	<-clock.waits // the loop waits for 23:00
	updates <- []policy.Policy{sched("hourly", "0 * * * *"), sched("half", "30 * * * *")}
	clock.tick()          // 22:30: half, claimed elsewhere, does not start here
	late(3 * time.Second) // 23:00:03: hourly kept its schedule through the update
	ran("hourly", at(23, 0))
	clock.tick() // 23:30
	ran("half", at(23, 30))
	cancel()
	<-clock.waits
	if err := <-done; err != context.Canceled {
		t.Fatalf("Run returned %v", err)
	}
	select {
	case j := <-started:
		t.Fatalf("job %d of %s started besides", j.ID(), j.Policy().Name)
	default:
	}
	want := []claim{{"policy/hourly", at(22, 0)}, elsewhere, {"policy/hourly", at(23, 0)}, {"policy/half", at(23, 30)}}
	mu.Lock()
	defer mu.Unlock()
	if len(claims) != len(want) {
		t.Fatalf("claims %v, want %v", claims, want)
	}
	for i := range want {
		if claims[i].schedule != want[i].schedule || !claims[i].slot.Equal(want[i].slot) {
			t.Fatalf("claims %v, want %v", claims, want)
		}
	}
}
