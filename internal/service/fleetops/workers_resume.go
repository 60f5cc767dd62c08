package fleetops

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/service"
)

// resumeLookback is how long before this server took the lease a run may
// have been marked interrupted and still be resumed: a job manager of any
// server (every minute) may mark a dead leader's run before the lease
// expires.
const resumeLookback = 10 * time.Minute

// resumeRunsFor bounds the runs looked at by their start: longer runs
// than this are not resumed.
const resumeRunsFor = 7 * 24 * time.Hour

const (
	// eventResumed is the interrupted run's event naming the job that
	// carries it on (and marks it resumed: no leader resumes it again).
	eventResumed = "resumed"
	// eventResumes is the new job's event naming the run it carries on.
	eventResumes = "resumes"
)

// resumeRuns carries on, while this server leads a fleet, the policy runs
// whose server died while it ran them (the job managers mark such a run
// failed, "interrupted"), scheduled or started through the API: the VMs
// the run did not back up run again as a new job of the policy, for the
// same user, and the two jobs name each other in their logs. A VM whose
// unit the dead server had handed to a worker waits for that unit to end
// (the engine holds it, fleet.HoldGrants): its task takes that unit's
// point if it committed one, else the VM is backed up again
// (engine.StartResuming). A
// resumed scheduled run makes its policy's slots skip while it goes, as
// the run it carries on did (resumed.running). It looks once the engine
// was given the workers (looked closed: a run resumed before would run in
// this process), then every every, and returns the function that stops
// it; resumed.ready is closed after the first look, or when it stops.
func (s Ops) resumeRuns(ctx context.Context, eng *engine.Engine, cat catalog.Catalog, looked <-chan struct{},
	every time.Duration, resumed *resumedRuns) (stop func()) {
	r := resumer{Ops: s, eng: eng, cat: cat, since: time.Now().Add(-resumeLookback), done: map[int64]bool{}, resumed: resumed}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer resumed.lookedOnce()
		select {
		case <-ctx.Done():
			return
		case <-looked:
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			r.resumeInterrupted(ctx)
			resumed.lookedOnce()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}

// resumer resumes the interrupted runs while this server leads.
type resumer struct {
	Ops
	eng *engine.Engine
	cat catalog.Catalog
	// since: runs marked interrupted before are left alone.
	since time.Time
	// done are the runs looked at already in this holding of the lease.
	done map[int64]bool
	// resumed are the scheduled runs resumed, by policy.
	resumed *resumedRuns
}

// resumeInterrupted resumes the API's policy runs marked interrupted
// since r.since and not resumed yet.
func (r resumer) resumeInterrupted(ctx context.Context) {
	jobs, err := r.cat.ListJobs(ctx, catalog.JobFilter{Kind: catalog.KindBackupPolicy, Status: catalog.StatusFailed,
		Since: time.Now().Add(-resumeRunsFor)})
	if err != nil {
		if ctx.Err() == nil {
			r.Logger().Warn("the interrupted runs cannot be listed: they are not resumed yet", "err", err)
		}
		return
	}
	for _, j := range jobs {
		if r.done[j.ID] || !strings.HasPrefix(j.Error, "interrupted") || j.FinishedAt.Before(r.since) {
			continue
		}
		if err := r.resume(ctx, j); err != nil {
			if ctx.Err() == nil {
				r.Logger().Warn("an interrupted run cannot be resumed", "job", j.ID, "policy", j.Policy, "err", err)
			}
			continue
		}
		r.done[j.ID] = true
	}
}

// resume starts the rest of interrupted run j, unless it was resumed.
func (r resumer) resume(ctx context.Context, j catalog.Job) error {
	s, eng, cat := r.Ops, r.eng, r.cat
	events, err := cat.ListEvents(ctx, catalog.EventFilter{JobID: j.ID})
	if err != nil {
		return err
	}
	for _, ev := range events {
		if ev.Kind == eventResumed {
			return nil
		}
	}
	tasks, err := cat.ListTasks(ctx, catalog.TaskFilter{JobID: j.ID})
	if err != nil {
		return err
	}
	st, err := s.ConfigInEffect(ctx)
	if err != nil {
		return err
	}
	p, ok := st.Engine.Policy(j.Policy)
	if !ok {
		return s.markResumed(ctx, cat, j.ID, fmt.Sprintf("policy %s is no longer in the configuration: the run's remaining VMs are not resumed", j.Policy))
	}
	if other := r.resumed.get(j.Policy); j.User == service.ScheduleUser && other.Job != nil {
		// An older scheduled run of the policy: one run at a time, as the
		// schedule keeps them.
		return s.markResumed(ctx, cat, j.ID, fmt.Sprintf("not resumed: the later run of policy %s (job %d) goes on as job %d",
			j.Policy, other.Resumes, other.Job.ID()))
	}
	rest, names := remainingVMs(p, tasks)
	left := fmt.Sprintf("%d VM(s)", len(names))
	switch {
	case len(tasks) == 0:
		left = "every VM" // interrupted before it listed its VMs
	case len(names) == 0:
		return s.markResumed(ctx, cat, j.ID, "every VM of the run was backed up before it was interrupted: nothing to resume")
	}
	run, err := eng.StartResuming(job.WithUser(ctx, job.User{Name: j.User, Token: j.Token}), rest, j.ID)
	if err != nil {
		return err
	}
	s.Logger().Warn("an interrupted run resumes under this leader", "job", j.ID, "policy", j.Policy, "resumed_as", run.ID(), "vms", left)
	s.logJob(run)
	if j.User == service.ScheduleUser {
		r.resumed.add(j.Policy, engine.Resumed{Job: run, Resumes: j.ID})
	}
	now := time.Now()
	if err := cat.AddEvents(ctx, []catalog.Event{{JobID: run.ID(), Time: now, Level: "info", Kind: eventResumes,
		Message: fmt.Sprintf("resumes job %d, interrupted: %s of the run not backed up", j.ID, left),
		Fields:  map[string]any{"resumes": j.ID}}}); err != nil {
		s.Logger().Warn("the resumed run's log does not say which run it resumes", "job", run.ID(), "err", err)
	}
	return s.markResumed(ctx, cat, j.ID, fmt.Sprintf("resumed as job %d by the server that took the schedules over", run.ID()))
}

// markResumed records in interrupted run id's log that it was resumed
// (or why it needs no resuming), so that no leader resumes it again.
func (s Ops) markResumed(ctx context.Context, cat catalog.Catalog, id int64, msg string) error {
	return cat.AddEvents(ctx, []catalog.Event{{JobID: id, Time: time.Now(), Level: "info", Kind: eventResumed, Message: msg}})
}

// remainingVMs is p narrowed to the VMs of an interrupted run's tasks
// without a point, and their names (p itself, and none, when the run
// recorded no task). The names are added to p's select, which every
// selected VM must also match: a VM backed up by the run that shares its
// name with one that was not (on another connection) is backed up again.
func remainingVMs(p policy.Policy, tasks []catalog.Task) (policy.Policy, []string) {
	var names []string
	for _, t := range tasks {
		if t.Status == catalog.StatusSuccess && t.BackupPointID != "" {
			continue
		}
		if n := escapeGlob(t.VMName); !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if len(names) > 0 {
		p.Select.Names = names
	}
	return p, names
}

// escapeGlob makes name a pattern (path.Match's) matching only itself.
func escapeGlob(name string) string {
	var b strings.Builder
	for _, r := range name {
		if strings.ContainsRune(`\*?[`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// resumedRuns are the scheduled runs a leader resumed, by policy, which
// its schedules' slots must not overlap (engine.Scheduler.Running), and
// whether it looked for them once (ready: the schedules start after it).
type resumedRuns struct {
	mu     sync.Mutex
	runs   map[string]engine.Resumed
	ready  chan struct{}
	closed sync.Once
}

func newResumedRuns() *resumedRuns {
	return &resumedRuns{runs: map[string]engine.Resumed{}, ready: make(chan struct{})}
}

func (r *resumedRuns) add(policy string, run engine.Resumed) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs[policy] = run
}

// get is the resumed run of policy (a zero Resumed: none, or it ended).
func (r *resumedRuns) get(policy string) engine.Resumed {
	r.mu.Lock()
	defer r.mu.Unlock()
	run := r.runs[policy]
	if run.Job == nil {
		return engine.Resumed{}
	}
	select {
	case <-run.Job.Done():
		delete(r.runs, policy)
		return engine.Resumed{}
	default:
		return run
	}
}

// lookedOnce closes ready.
func (r *resumedRuns) lookedOnce() { r.closed.Do(func() { close(r.ready) }) }

// wait waits for the first look for interrupted runs, at most bound (a
// catalog that does not answer must not keep the schedules from
// running): a slot that came before would start a run of a policy whose
// interrupted run is then resumed beside it.
func (r *resumedRuns) wait(ctx context.Context, bound time.Duration, log func(string, ...any)) {
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-r.ready:
	case <-ctx.Done():
	case <-t.C:
		log("the interrupted runs were not looked for in time: the schedules start before they are resumed", "waited", bound)
	}
}
