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
	// Now and After are the clock (defaults: time.Now, time.After);
	// tests replace them to drive time.
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
	// Started, if set, is called with every job the scheduler starts.
	Started func(*Job)
}

type scheduled struct {
	p       policy.Policy
	sched   cron.Schedule
	next    time.Time
	running *Job
}

// Run loops until ctx ends, then cancels running jobs (they stop cleanly
// and release their hypervisor sessions), waits for them and returns the
// context's error.
func (s *Scheduler) Run(ctx context.Context) error {
	now, after := s.Now, s.After
	if now == nil {
		now = time.Now
	}
	if after == nil {
		after = time.After
	}
	var list []*scheduled
	for _, p := range s.Policies {
		sc, err := p.ParseSchedule()
		if err != nil {
			return fmt.Errorf("policy %s: %w", p.Name, err)
		}
		if sc != nil {
			list = append(list, &scheduled{p: p, sched: sc, next: sc.Next(now())})
		}
	}
	if len(list) == 0 {
		<-ctx.Done()
		return ctx.Err()
	}
	for {
		earliest := list[0].next
		for _, e := range list[1:] {
			if e.next.Before(earliest) {
				earliest = e.next
			}
		}
		select {
		case <-ctx.Done():
			for _, e := range list {
				if e.running != nil {
					<-e.running.Done()
				}
			}
			return ctx.Err()
		case <-after(max(earliest.Sub(now()), 0)):
		}
		t := now()
		for _, e := range list {
			if e.next.After(t) {
				continue
			}
			e.next = e.sched.Next(t)
			s.fire(ctx, e, t)
		}
	}
}

func (s *Scheduler) fire(ctx context.Context, e *scheduled, t time.Time) {
	if e.running != nil {
		select {
		case <-e.running.Done():
			e.running = nil
		default:
			s.Engine.recordSkipped(ctx, e.p, e.running, t)
			return
		}
	}
	j, err := s.Engine.Start(ctx, e.p)
	if err != nil {
		s.Engine.log.Error("scheduled run could not start", "policy", e.p.Name, "err", err)
		return
	}
	e.running = j
	if s.Started != nil {
		s.Started(j)
	}
}

// recordSkipped records a scheduled run that did not start because the
// previous run of the same policy is still going.
func (e *Engine) recordSkipped(ctx context.Context, p policy.Policy, running *Job, t time.Time) {
	msg := fmt.Sprintf("skipped: the previous run of policy %s (job %d) is still running", p.Name, running.ID())
	e.log.Warn(msg)
	run, err := e.startRun(ctx, catalog.Job{Kind: catalog.KindBackupPolicy, Policy: p.Name, Repository: p.Repository,
		Object: policyObject(p.Name), Status: catalog.StatusRunning, Worker: e.o.Worker, CreatedAt: t, StartedAt: t})
	if err != nil {
		e.log.Warn("recording a skipped run failed", "err", err)
		return
	}
	run.Record(catalog.Event{Time: t, Level: "warn", Kind: "skipped", Message: msg, Fields: map[string]any{"running_job": running.ID()}})
	if _, err := run.Finish(ctx, catalog.StatusCancelled, msg); err != nil {
		e.log.Warn("recording a skipped run failed", "err", err)
	}
}
