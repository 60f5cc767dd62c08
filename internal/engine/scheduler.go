package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/policy"
)

// Scheduler runs policies on their cron schedules until its context ends:
// the long-running loop of `coffer server`. A policy whose previous run is
// still going when its time comes is skipped, and the skip is recorded as a
// job (status cancelled, with a "skipped" event) so it shows in `coffer
// jobs`. Policies without a schedule are ignored.
type Scheduler struct {
	Engine   *Engine
	Policies []policy.Policy
	// Updates, when set, replaces Policies while Run goes on (the
	// configuration in effect changed): a policy whose schedule is the
	// same keeps its next run, a new or rescheduled one is scheduled from
	// now, a removed one is started no more. Runs in progress go on, are
	// waited for at the end, and still make a run of their policy that
	// comes while they go skip. Set the engine's new configuration
	// (Engine.Reload) before sending.
	Updates <-chan []policy.Policy
	// Now and After are the clock (defaults: time.Now, time.After);
	// tests replace them to drive time.
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
	// Started, if set, is called with every job the scheduler starts.
	Started func(*Job)
	// Claim, when set, claims each run in the catalog before it starts,
	// by the policy's schedule name ("policy/NAME") and the slot its
	// schedule named: a run another server claimed is not started here
	// (several servers on one catalog; see internal/leader).
	Claim func(ctx context.Context, schedule string, slot time.Time) (bool, error)
	// LastRun, when set, is the catalog's newest claimed slot of a
	// schedule: when Run starts, the slots a policy's schedule named
	// after it and before now, which no server ran (none led the
	// schedules: a takeover, or every server down), are recorded as one
	// skipped run (see recordMissed).
	LastRun func(ctx context.Context, schedule string) (time.Time, bool, error)
	// Running, when set, is a run of the policy that this scheduler did
	// not start but that its slots must not overlap (a scheduled run of
	// a dead leader resumed by this one), or none (a zero Resumed).
	Running func(policy string) Resumed
}

// Resumed is a run of a policy that carries on another, interrupted one.
type Resumed struct {
	Job     *Job
	Resumes int64 // the interrupted run's job
}

type scheduled struct {
	p     policy.Policy
	sched cron.Schedule
	next  time.Time
}

// Run loops until ctx ends, then cancels running jobs (they stop cleanly
// and release their hypervisor sessions), waits for them and returns the
// context's error. A bad schedule in Policies is an error at once; one in
// an update is logged and the update ignored.
func (s *Scheduler) Run(ctx context.Context) error {
	now, after := s.Now, s.After
	if now == nil {
		now = time.Now
	}
	if after == nil {
		after = time.After
	}
	list, err := plan(s.Policies, nil, now())
	if err != nil {
		return err
	}
	running := map[string]*Job{} // by policy name
	s.recordMissed(ctx, list, now())
	for {
		var wake <-chan time.Time
		if len(list) > 0 {
			earliest := list[0].next
			for _, e := range list[1:] {
				if e.next.Before(earliest) {
					earliest = e.next
				}
			}
			wake = after(max(earliest.Sub(now()), 0))
		}
		select {
		case <-ctx.Done():
			for _, j := range running {
				<-j.Done()
			}
			return ctx.Err()
		case ps := <-s.Updates:
			next, err := plan(ps, list, now())
			if err != nil {
				s.Engine.log.Error("the new schedules are refused: keeping the previous ones", "err", err)
				continue
			}
			list = next
			continue
		case <-wake:
		}
		for name, j := range running { // forget finished runs (of removed policies too)
			select {
			case <-j.Done():
				delete(running, name)
			default:
			}
		}
		t := now()
		for _, e := range list {
			if e.next.After(t) {
				continue
			}
			slot := e.next
			e.next = e.sched.Next(t)
			s.fire(ctx, e, slot, running)
		}
	}
}

// plan schedules the policies that have a schedule; one that was in old
// with the same schedule keeps its next run.
func plan(ps []policy.Policy, old []*scheduled, now time.Time) ([]*scheduled, error) {
	var out []*scheduled
	for _, p := range ps {
		sc, err := p.ParseSchedule()
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", p.Name, err)
		}
		if sc == nil {
			continue
		}
		e := &scheduled{p: p, sched: sc, next: sc.Next(now)}
		for _, o := range old {
			if o.p.Name == p.Name && o.p.Schedule == p.Schedule && o.p.Timezone == p.Timezone {
				e.next = o.next
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// fire starts the run of a policy at slot t, the time its schedule named;
// running holds the runs in progress by policy name.
func (s *Scheduler) fire(ctx context.Context, e *scheduled, t time.Time, running map[string]*Job) {
	if r := running[e.p.Name]; r != nil {
		select {
		case <-r.Done():
			delete(running, e.p.Name)
		default:
			s.skip(ctx, e.p, r, t)
			return
		}
	}
	if r := s.resumed(e.p.Name); r.Job != nil {
		s.skip(ctx, e.p, r.Job, t)
		return
	}
	if !s.claim(ctx, e.p, t) {
		return
	}
	j, err := s.Engine.Start(ctx, e.p)
	if err != nil {
		s.Engine.log.Error("scheduled run could not start", "policy", e.p.Name, "err", err)
		return
	}
	// The slot in the log tells every run of the schedule apart, whichever
	// server ran it.
	j.event("info", "scheduled", "scheduled run of "+t.UTC().Format(time.RFC3339), map[string]any{"slot": t.UTC().Format(time.RFC3339)})
	running[e.p.Name] = j
	if s.Started != nil {
		s.Started(j)
	}
}

// skip records the run of p at slot t as skipped, the previous run
// (running) still going. The slot is claimed as a run's would be, so that
// a server taking the schedules over does not count it missed again.
func (s *Scheduler) skip(ctx context.Context, p policy.Policy, running *Job, t time.Time) {
	if !s.claim(ctx, p, t) {
		return
	}
	msg := fmt.Sprintf("skipped: the previous run of policy %s (job %d) is still running", p.Name, running.ID())
	s.Engine.recordSkipped(ctx, p, msg, t, map[string]any{"running_job": running.ID()})
}

// claim claims the slot t of p's schedule when several servers share
// the catalog: false when another server claimed it, or the claim
// failed (logged).
func (s *Scheduler) claim(ctx context.Context, p policy.Policy, t time.Time) bool {
	if s.Claim == nil {
		return true
	}
	ok, err := s.Claim(ctx, "policy/"+p.Name, t)
	if err != nil {
		s.Engine.log.Error("claiming a scheduled run failed: not started", "policy", p.Name, "slot", t, "err", err)
		return false
	}
	if !ok {
		s.Engine.log.Info("scheduled run claimed by another server", "policy", p.Name, "slot", t)
	}
	return ok
}

// resumed is Running's run of policy name when it still goes.
func (s *Scheduler) resumed(name string) Resumed {
	if s.Running == nil {
		return Resumed{}
	}
	r := s.Running(name)
	if r.Job == nil {
		return Resumed{}
	}
	select {
	case <-r.Job.Done():
		return Resumed{}
	default:
		return r
	}
}

// recordSkipped records a scheduled run of p at slot t that did not
// start, saying why (msg), as a cancelled job with a "skipped" event.
func (e *Engine) recordSkipped(ctx context.Context, p policy.Policy, msg string, t time.Time, fields map[string]any) {
	e.log.Warn(msg)
	run, err := e.startRun(ctx, catalog.Job{Kind: catalog.KindBackupPolicy, Policy: p.Name, Repository: p.Repository,
		Object: policyObject(p.Name), Status: catalog.StatusRunning, Worker: e.o.Worker, CreatedAt: t, StartedAt: t})
	if err != nil {
		e.log.Warn("recording a skipped run failed", "err", err)
		return
	}
	run.Record(catalog.Event{Time: t, Level: "warn", Kind: "skipped", Message: msg, Fields: fields})
	if _, err := run.Finish(ctx, catalog.StatusCancelled, msg); err != nil {
		e.log.Warn("recording a skipped run failed", "err", err)
	}
}
