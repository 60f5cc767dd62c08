package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"
)

// Run is one run of a job: the slot its schedule named, the end of its
// window (zero: none) and, for a verify with a read-data-period, its
// share of the packs (Share of Shares).
type Run struct {
	Slot          time.Time
	WindowEnd     time.Time
	Share, Shares int
	// Missed: the slot passed while every server was down, and this
	// run catches it up (missed: run-once).
	Missed bool
}

// ErrWindowClosed is the cause of a run stopped at the end of its window.
var ErrWindowClosed = errors.New("maintenance window closed")

// Scheduler starts maintenance jobs at their schedules' times, within
// their windows, until its context ends. It never blocks backups: jobs
// run in their own goroutines, and gc and verify share the repository
// with running backups as they always do.
type Scheduler struct {
	// Jobs are the jobs to run; those that follow a policy's runs
	// (After) are not scheduled here.
	Jobs []Job
	// Updates, when set, brings the jobs of a changed configuration:
	// a job of the same name and settings keeps its next slot and its
	// run in progress; a changed one keeps its run in progress and
	// takes its new schedule from now; a removed one's run in progress
	// goes on to its end.
	Updates <-chan []Job
	// Runner runs one job (the service's gc, verify, forget or copy,
	// recorded as a task). Its context ends at the end of the window.
	Runner func(ctx context.Context, j Job, r Run) error
	// Claim, when set, claims a run in the catalog before it starts: a
	// run claimed elsewhere (another server) is not started here.
	Claim func(ctx context.Context, schedule string, slot time.Time) (bool, error)
	// LastRun, when set, is the slot of the newest run of a schedule
	// that any server claimed (false: none is known). At start, a job
	// with missed: run-once whose schedule named a slot after it runs
	// that slot once, as soon as its window allows, unless one of its
	// runs starts first.
	LastRun func(ctx context.Context, schedule string) (time.Time, bool, error)
	// Skipped, when set, records a run that did not start, and why.
	Skipped func(ctx context.Context, j Job, slot time.Time, why string)
	// Finished, when set, is told each run's end, once the next run of
	// the job may start.
	Finished func(j Job, r Run, err error)
	Logger   *slog.Logger
	// Now and After are the clock (tests drive them by hand).
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
}

type entry struct {
	job  Job
	next time.Time
	// missed is the slot a run catches up at catchAt (zero: none).
	missed, catchAt time.Time
	running         chan struct{} // closed when the run ends; nil when idle
	// closes is the end of the running run's window (zero: none) and
	// stop stops that run.
	closes time.Time
	stop   context.CancelCauseFunc
}

// busy reports whether the entry's last run is still going.
func (e *entry) busy() bool {
	if e.running == nil {
		return false
	}
	select {
	case <-e.running:
		e.running, e.stop, e.closes = nil, nil, time.Time{}
		return false
	default:
		return true
	}
}

// Run loops until ctx ends, then stops the running jobs, waits for them
// and returns ctx's error. One timer at a time serves both the schedules
// and the ends of windows, so a test's clock drives it step by step.
func (s *Scheduler) Run(ctx context.Context) error {
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.After == nil {
		s.After = time.After
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	list := s.update(ctx, nil, s.Jobs, true)
	for {
		if len(list) == 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case jobs := <-s.Updates:
				list = s.update(ctx, list, jobs, false)
				continue
			}
		}
		earliest := list[0].next
		for _, e := range list {
			if e.next.Before(earliest) {
				earliest = e.next
			}
			if !e.missed.IsZero() && e.catchAt.Before(earliest) {
				earliest = e.catchAt
			}
			if e.busy() && !e.closes.IsZero() && e.closes.Before(earliest) {
				earliest = e.closes
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case jobs := <-s.Updates:
			list = s.update(ctx, list, jobs, false)
			continue
		case <-s.After(max(earliest.Sub(s.Now()), 0)):
		}
		now := s.Now()
		for _, e := range list {
			if e.busy() && !e.closes.IsZero() && !e.closes.After(now) {
				e.stop(fmt.Errorf("%w: %s ended at %s", ErrWindowClosed, e.job.Window.Name, e.closes.Format("15:04")))
				e.closes = time.Time{} // stopped once
			}
		}
		for _, e := range list {
			if !e.next.After(now) {
				slot := e.next
				e.next = e.job.Schedule.Next(now)
				if s.fire(ctx, &wg, e, Run{Slot: slot}, now) {
					e.missed = time.Time{} // a run of its own came first
				}
				continue
			}
			if !e.missed.IsZero() && !e.catchAt.After(now) {
				slot := e.missed
				e.missed = time.Time{}
				s.Logger.Info("catching up a maintenance run missed while every server was down", "job", e.job.Name, "slot", slot)
				s.fire(ctx, &wg, e, Run{Slot: slot, Missed: true}, now)
			}
		}
	}
}

// update makes the entries of jobs (the scheduled ones), keeping the
// state of old's entries of the same name: the next slot of an
// unchanged job, the run in progress of any. At start, each looks for
// a run missed while every server was down.
func (s *Scheduler) update(ctx context.Context, old []*entry, jobs []Job, start bool) []*entry {
	byName := map[string]*entry{}
	for _, e := range old {
		byName[e.job.Name] = e
	}
	var list []*entry
	now := s.Now()
	for _, j := range Scheduled(jobs) {
		if e := byName[j.Name]; e != nil {
			if !sameJob(e.job, j) {
				s.Logger.Info("maintenance job changed: its schedule starts anew", "job", j.Name)
				e.job, e.next = j, j.Schedule.Next(now)
			}
			list = append(list, e)
			continue
		}
		e := &entry{job: j, next: j.Schedule.Next(now)}
		if start {
			s.findMissed(ctx, e, now)
		} else {
			s.Logger.Info("maintenance job added", "job", j.Name, "schedule", j.Spec)
		}
		list = append(list, e)
	}
	return list
}

// sameJob reports whether two resolutions of a job say the same.
func sameJob(a, b Job) bool {
	a.Schedule, b.Schedule = nil, nil
	return reflect.DeepEqual(a, b)
}

// findMissed looks, for a job with missed: run-once, for the newest slot
// its schedule named between the last run any server claimed and now:
// that slot is caught up once, now or when the window opens next.
func (s *Scheduler) findMissed(ctx context.Context, e *entry, now time.Time) {
	j := e.job
	if s.LastRun == nil {
		return
	}
	last, ok, err := s.LastRun(ctx, "maintenance/"+j.Name)
	if err != nil {
		s.Logger.Warn("reading a maintenance job's last run failed: a run missed while every server was down is not caught up",
			"job", j.Name, "err", err)
		return
	}
	if !ok { // a new schedule: nothing was missed
		return
	}
	var missed time.Time
	for at, n := j.Schedule.Next(last), 0; !at.IsZero() && !at.After(now) && n < maxMissedSlots; at, n = j.Schedule.Next(at), n+1 {
		missed = at
	}
	switch {
	case missed.IsZero():
		return
	case j.Missed == MissedSkip:
		s.Logger.Info("a maintenance run missed while every server was down is left (missed: skip)", "job", j.Name, "slot", missed)
		return
	}
	e.missed, e.catchAt = missed, now
	if j.Window != nil {
		e.catchAt = j.Window.NextOpen(now)
		if e.catchAt.IsZero() {
			e.missed = time.Time{}
		}
	}
}

// maxMissedSlots bounds the slots counted since a job's last run (an
// @every 1s schedule down for a week names 604,800).
const maxMissedSlots = 1_000_000

// fire starts a job's run unless it may not start now, and reports
// whether it started. The run is claimed first, so that a slot any
// server handled (ran, or skipped for its window or a run still going)
// is never taken for one missed while every server was down.
func (s *Scheduler) fire(ctx context.Context, wg *sync.WaitGroup, e *entry, r Run, now time.Time) bool {
	j, slot := e.job, r.Slot
	if s.Claim != nil {
		ok, err := s.Claim(ctx, "maintenance/"+j.Name, slot)
		if err != nil {
			s.Logger.Error("claiming a maintenance run failed: not started", "job", j.Name, "slot", slot, "err", err)
			return false
		}
		if !ok {
			s.Logger.Info("maintenance run claimed by another server", "job", j.Name, "slot", slot)
			return false
		}
	}
	if e.busy() {
		s.skip(ctx, j, slot, "the previous run is still going")
		return false
	}
	if j.Window != nil {
		open, end := j.Window.Open(now)
		if !open {
			s.skip(ctx, j, slot, fmt.Sprintf("outside its maintenance window (%s)", j.Window))
			return false
		}
		r.WindowEnd = end
	}
	if j.Kind == "verify" && j.ReadDataPeriod > 0 {
		r.Share, r.Shares = Share(j.Schedule, j.ReadDataPeriod, slot)
	}
	done := make(chan struct{})
	rctx, cancel := context.WithCancelCause(ctx)
	e.running, e.stop, e.closes = done, cancel, r.WindowEnd
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.Logger.Info("maintenance job started", "job", j.Name, "slot", slot)
		err := s.Runner(rctx, j, r)
		if cause := context.Cause(rctx); err != nil && errors.Is(cause, ErrWindowClosed) {
			err = cause
		}
		cancel(nil)
		close(done)
		if err != nil {
			s.Logger.Warn("maintenance job ended", "job", j.Name, "err", err)
		} else {
			s.Logger.Info("maintenance job finished", "job", j.Name)
		}
		if s.Finished != nil {
			s.Finished(j, r, err)
		}
	}()
	return true
}

func (s *Scheduler) skip(ctx context.Context, j Job, slot time.Time, why string) {
	s.Logger.Warn("maintenance run skipped", "job", j.Name, "slot", slot, "reason", why)
	if s.Skipped != nil {
		s.Skipped(ctx, j, slot, why)
	}
}

// Next lists the next n runs of a job after t, each with whether its
// window lets it start (for `coffer policy check`).
func Next(j Job, t time.Time, n int) []Planned {
	var out []Planned
	for range n {
		t = j.Schedule.Next(t)
		if t.IsZero() {
			break
		}
		p := Planned{At: t, Starts: true}
		if j.Window != nil {
			p.Starts, _ = j.Window.Open(t)
		}
		if j.Kind == "verify" && j.ReadDataPeriod > 0 {
			p.Share, p.Shares = Share(j.Schedule, j.ReadDataPeriod, t)
		}
		out = append(out, p)
	}
	return out
}

// Planned is a run to come.
type Planned struct {
	At            time.Time
	Starts        bool // false: outside its window, it will be skipped
	Share, Shares int
}
