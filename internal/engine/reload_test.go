package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/fake"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
)

// waitGuard bounds a wait for what must happen: a failure guard, not a
// measurement.
const waitGuard = time.Minute

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitGuard):
		t.Fatalf("no %s within %s", what, waitGuard)
	}
	var zero T
	return zero
}

// TestReloadChangesLimitsAndKeepsRunningJobs: a reload changes the
// engine-wide limits for the jobs running too (more task slots start the
// queued VMs at once, a rate applies), while a running job keeps the
// connectors it started with; jobs started after it run with the new
// configuration; repositories whose definition changed are opened again.
func TestReloadChangesLimitsAndKeepsRunningJobs(t *testing.T) {
	started := make(chan string, 8)
	release := make(chan struct{})
	cfg := &policy.Config{Limits: policy.Limits{Tasks: 1}, Repositories: []policy.Repository{{Name: "main", Location: "/srv/a"}}}
	e := newEnv(t, fake.Options{Seed: 41, VMs: 3}, cfg, func(o *Options) {
		o.Runner = func(ctx context.Context, _ *repo.Writer, _ hypervisor.Connector, r backup.VMRequest, _ backup.Options) (*repo.Point, error) {
			started <- r.VM.Name
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &repo.Point{Mode: "full"}, nil
		}
	})
	p := testPolicy("nightly")
	p.Repository = "main"
	j, err := e.eng.Start(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	receive(t, started, "first VM")
	select {
	case vm := <-started:
		t.Fatalf("%s started beyond the limit of 1 task", vm)
	default:
	}
	// The connection goes and the limits grow: the running job keeps its
	// connector, and its two queued VMs start now.
	next := &policy.Config{Limits: policy.Limits{Tasks: 4, Rate: 100 << 20}, Repositories: []policy.Repository{{Name: "main", Location: "/srv/b"}}}
	e.eng.Reload(Reload{Config: next})
	receive(t, started, "second VM after the reload")
	receive(t, started, "third VM after the reload")
	if got := e.eng.total.Limit(); got != rate.Limit(100<<20) {
		t.Fatalf("engine-wide rate after the reload: %v", got)
	}
	close(release)
	res, err := j.Wait()
	if err != nil || res.Job.Status != catalog.StatusSuccess || len(res.Tasks) != 3 {
		t.Fatalf("the job running through the reload: %+v %v", res, err)
	}
	e.eng.mu.Lock()
	_, kept := e.eng.repos["main"]
	retired := len(e.eng.retired)
	e.eng.mu.Unlock()
	if kept || retired != 1 {
		t.Fatalf("repository main moved: still cached %v, %d retired", kept, retired)
	}
	// A job started now runs with the new configuration: no connection.
	res = e.run(testPolicy("after"))
	if res.Job.Status != catalog.StatusFailed || !strings.Contains(res.Job.Error, "connection lab: no connector available") {
		t.Fatalf("a job after the connection went: %s %s", res.Job.Status, res.Job.Error)
	}
	e.eng.Reload(Reload{Config: &policy.Config{}})
	if got := e.eng.total.Limit(); got != rate.Inf {
		t.Fatalf("engine-wide rate after a reload without one: %v", got)
	}
}

// TestSchedulerUpdates: new schedules take effect while the scheduler
// runs: a new policy runs at its time, a removed one no more, a
// rescheduled one from now.
func TestSchedulerUpdates(t *testing.T) {
	e, clock := schedulerEnv(t, 42)
	updates := make(chan []policy.Policy)
	started := make(chan *Job, 8)
	s := &Scheduler{Engine: e.eng, Policies: []policy.Policy{sched("hourly", "0 * * * *")}, Updates: updates, Now: clock.Now,
		After: clock.After, Started: func(j *Job) { started <- j }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	at := func(h, m int, policy string) {
		t.Helper()
		clock.tick()
		j := receive(t, started, "a run")
		if want := time.Date(2026, 11, 23, h, m, 0, 0, time.UTC); j.Policy().Name != policy || !clock.Now().Equal(want) {
			t.Fatalf("run of %s at %s, want %s at %s", j.Policy().Name, clock.Now(), policy, want)
		}
		j.Wait()
	}
	update := func(ps ...policy.Policy) {
		<-clock.waits // the loop waits for its next run
		updates <- ps
	}
	at(22, 0, "hourly")
	update(sched("hourly", "0 * * * *"), sched("half", "30 * * * *"))
	at(22, 30, "half")
	update(sched("half", "30 * * * *")) // hourly goes: nothing at 23:00
	at(23, 30, "half")
	// An update with a bad schedule is refused whole: half stays at :30.
	update(sched("half", "45 * * * *"), sched("bad", "every tuesday"))
	at(24, 30, "half")
	update(sched("half", "45 * * * *"))
	at(24, 45, "half")
	cancel()
	<-clock.waits
	if err := <-done; err != context.Canceled {
		t.Fatalf("Run returned %v", err)
	}
}
