package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
)

// ErrCancelled is the cause of a job stopped by Job.Cancel.
var ErrCancelled = errors.New("job cancelled")

// Job is one run of a policy, started by Engine.Start.
type Job struct {
	e      *Engine
	s      *setup // the configuration and connectors the job started with
	p      policy.Policy
	ctx    context.Context
	cancel context.CancelCauseFunc
	run    JobRun    // the job's record, log and progress
	rec    *recorder // its VM tasks and backup points
	done   chan struct{}
	one    *VMBackup // a backup of one VM now (StartVM); nil for a policy run
	// resumes are the interrupted runs this one carries on (StartResuming,
	// VMBackup.Resumes), whose task of each VM it supersedes
	// (task.supersede).
	resumes []int64

	r       *repo.Repository
	w       *repo.Writer
	history []*repo.Point

	mu       sync.Mutex
	record   catalog.Job
	tasks    []*task
	problems []string // job-level failures (a connection that could not be inventoried)
	cause    error    // the first job-level failure that stopped every VM (Point)
	pending  sync.WaitGroup
	result   *Result
	err      error
}

// Result is a finished job: its record and every task's.
type Result struct {
	Job   catalog.Job
	Tasks []catalog.Task
}

// Failed lists the tasks that failed.
func (r *Result) Failed() []catalog.Task {
	var out []catalog.Task
	for _, t := range r.Tasks {
		if t.Status == catalog.StatusFailed {
			out = append(out, t)
		}
	}
	return out
}

// Start records a job for the policy and runs it in the background. A
// policy the engine cannot run as written (group: datastore on a
// connection without a storage snapshot provider: refuseGroup) is
// refused, never run differently.
func (e *Engine) Start(ctx context.Context, p policy.Policy) (*Job, error) {
	return e.start(ctx, p, nil)
}

// StartResuming is Start for a run that carries on the policy run of job
// interrupted (a dead leader's, resumed by the next one): before a VM's
// first attempt, its task in that run is superseded in the catalog
// (catalog.Catalog.SupersedeTask). A VM whose unit of that run committed
// its point meanwhile (one the dead leader handed to a worker, which
// ended after the resumed run listed its VMs) is not backed up again:
// its task takes that point as its own.
func (e *Engine) StartResuming(ctx context.Context, p policy.Policy, interrupted int64) (*Job, error) {
	return e.start(ctx, p, []int64{interrupted})
}

func (e *Engine) start(ctx context.Context, p policy.Policy, resumes []int64) (*Job, error) {
	su := e.cur.Load()
	if err := refuseGroup(ctx, su, p); err != nil {
		return nil, err
	}
	now := time.Now()
	run, err := e.startRun(ctx, catalog.Job{Kind: catalog.KindBackupPolicy, Policy: p.Name, Repository: p.Repository,
		Object: policyObject(p.Name), Status: catalog.StatusRunning, Worker: e.o.Worker, CreatedAt: now, StartedAt: now})
	if err != nil {
		return nil, err
	}
	jctx, cancel := context.WithCancelCause(run.Context())
	j := &Job{e: e, s: su, p: p, ctx: jctx, cancel: cancel, done: make(chan struct{}), run: run, record: run.Job(), resumes: resumes}
	j.rec = newRecorder(e.o.Catalog, e.log, e.o.FlushInterval, nil)
	go j.execute()
	return j, nil
}

// policyObject is the access-control path of a policy.
func policyObject(name string) string { return "/policies/" + name }

// ID is the job's catalog ID.
func (j *Job) ID() int64 { return j.record.ID }

// Policy is the policy the job runs.
func (j *Job) Policy() policy.Policy { return j.p }

// Cancel stops the job: queued VMs are not started, running ones stop and
// release their hypervisor sessions. (A task manager's Cancel does the
// same from any process, through the run's context.)
func (j *Job) Cancel() { j.cancel(ErrCancelled) }

// Done is closed when the job has finished.
func (j *Job) Done() <-chan struct{} { return j.done }

// Wait waits for the job and returns its result. The error is set only
// when the job could not be recorded; failures of VMs are in the result.
func (j *Job) Wait() (*Result, error) {
	<-j.done
	return j.result, j.err
}

func (j *Job) event(level, kind, msg string, fields map[string]any) {
	j.run.Record(catalog.Event{JobID: j.record.ID, Level: level, Kind: kind, Message: msg, Fields: fields})
}

// sampleProgress hands the job's progress to its run every FlushInterval
// until stop is closed.
func (j *Job) sampleProgress(stop <-chan struct{}) {
	t := time.NewTicker(j.e.o.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			j.run.Progress(j.Progress().sample())
		}
	}
}

func (j *Job) execute() {
	defer close(j.done)
	defer j.cancel(nil)
	defer j.e.live.track(j)()
	stop := make(chan struct{})
	go j.sampleProgress(stop)
	defer close(stop)
	var targets []target
	if j.one != nil {
		j.event("info", "job-start", fmt.Sprintf("backup of VM %s of %s started on %s", j.one.VM.Name, j.one.Connection, j.e.o.Worker), nil)
		targets = []target{{j.one.Connection, j.one.VM}}
	} else {
		j.event("info", "job-start", fmt.Sprintf("policy %s started on %s", j.p.Name, j.e.o.Worker), nil)
		targets = j.inventory()
	}
	if len(targets) == 0 && len(j.problems) == 0 {
		j.problems = append(j.problems, "the policy selects no VM")
	}
	if len(targets) > 0 {
		if err := j.openRepository(); err != nil {
			j.fail(err)
			targets = nil
		}
	}
	// The prediction is recorded beside the run, not before it: planning
	// a large fleet takes CPU-seconds that must not delay the first VM.
	// A backup of one VM now is no run of a plan.
	var predicted sync.WaitGroup
	if len(targets) > 0 {
		if j.one == nil {
			predicted.Go(func() { j.predict(targets) })
		}
		if err := j.createTasks(targets); err != nil {
			j.fail(err)
		} else {
			j.schedule()
			j.pending.Wait()
		}
	}
	predicted.Wait()
	j.finish()
}

// fail records a job-level failure that stops every VM of the job.
func (j *Job) fail(err error) {
	j.problems = append(j.problems, err.Error())
	if j.cause == nil {
		j.cause = err
	}
}

type target struct {
	conn string
	vm   hypervisor.VM
}

// inventory lists and filters the VMs of every connection of the policy.
// A connection that fails is a job-level problem; the others go on.
func (j *Job) inventory() []target {
	var out []target
	for _, name := range j.p.ConnectionNames() {
		conn := j.s.conns[name]
		if conn == nil {
			j.problems = append(j.problems, fmt.Sprintf("connection %s: no connector available", name))
			continue
		}
		start := time.Now()
		vms, err := j.listVMs(conn)
		if err != nil {
			j.problems = append(j.problems, fmt.Sprintf("inventory of %s: %v", name, err))
			j.event("error", "inventory", fmt.Sprintf("inventory of %s failed: %v", name, err), nil)
			continue
		}
		sel := j.p.SelectVMs(vms)
		j.event("info", "inventory", fmt.Sprintf("%s: %d VMs, %d selected", name, len(vms), len(sel)),
			map[string]any{"connection": name, "vms": len(vms), "selected": len(sel), "seconds": time.Since(start).Seconds()})
		records := make([]catalog.VMRecord, len(vms))
		for i, vm := range vms {
			records[i] = catalog.VMRecord{Connection: name, ID: vm.ID, Name: vm.Name, Host: vm.Host, Datastores: vm.Datastores,
				Tags: vm.Tags, Bytes: vm.ProvisionedBytes(), LastSeen: start}
		}
		if err := j.e.o.Catalog.PutVMs(context.WithoutCancel(j.ctx), records); err != nil {
			j.e.log.Warn("recording the inventory failed", "connection", name, "err", err)
		}
		for _, vm := range sel {
			out = append(out, target{name, vm})
		}
	}
	return out
}

// listVMs runs Inventory with the policy's timeout and retries.
func (j *Job) listVMs(conn hypervisor.Connector) ([]hypervisor.VM, error) {
	timeout := j.p.Timeouts.Inventory
	if timeout == 0 {
		timeout = policy.DefaultInventoryTimeout
	}
	rt := j.p.Retries.WithDefaults()
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(j.ctx, timeout)
		vms, err := conn.Inventory(ctx)
		cancel()
		if err == nil || !retryable(err) || attempt >= rt.Attempts || j.ctx.Err() != nil {
			return vms, err
		}
		if !wait(j.ctx, backoff(rt, attempt)) {
			return nil, context.Cause(j.ctx)
		}
	}
}

func (j *Job) openRepository() error {
	r, err := j.e.repository(j.ctx, j.p.Repository)
	if err != nil {
		return fmt.Errorf("repository %s: %w", nameOr(j.p.Repository, "(default)"), err)
	}
	if r == nil {
		return nil // a custom runner without repositories
	}
	if !j.lockUntil(time.Now()).IsZero() && !r.Store().Properties().Retention {
		// Backing up without the lock the policy promises would leave
		// points deletable that the operator believes are not.
		if j.one != nil {
			return fmt.Errorf("%w: the backup asks for a lock (immutable-for), and repository %s at %s has none: use an S3 bucket with Object Lock, or back up without a lock",
				ErrCannotLock, nameOr(j.p.Repository, "(default)"), r.Store().Properties().Location)
		}
		return fmt.Errorf("policy %s asks for immutable-for, but repository %s at %s cannot lock objects: use an S3 bucket with Object Lock, or remove immutable-for",
			j.p.Name, nameOr(j.p.Repository, "(default)"), r.Store().Properties().Location)
	}
	j.r = r
	// Only the manifests new or rewritten since the last job are read:
	// reading them all again cost every job's start in proportion to
	// the repository's points.
	if j.history, err = r.HistoryPoints(j.ctx); err != nil {
		return fmt.Errorf("list backup points: %w", err)
	}
	if j.history == nil {
		j.history = []*repo.Point{}
	}
	if j.w, err = r.NewWriter(j.ctx, fmt.Sprintf("job %d policy %s", j.record.ID, j.p.Name)); err != nil {
		return fmt.Errorf("open a write session: %w", err)
	}
	return nil
}

// finish settles the job: closes the write session, applies retention
// after successful backups and the policy's keep-storage-snapshots after
// any run not cancelled, and records the outcome.
func (j *Job) finish() {
	ctx := context.WithoutCancel(j.ctx)
	if j.w != nil {
		if err := j.w.Close(ctx); err != nil {
			j.event("error", "repository", fmt.Sprintf("closing the write session: %v", err), nil)
		}
	}
	j.mu.Lock()
	var ok, failed, cancelled int
	var failures []string
	for _, t := range j.tasks {
		switch t.rec.Status {
		case catalog.StatusSuccess:
			ok++
		case catalog.StatusFailed:
			failed++
			failures = append(failures, fmt.Sprintf("%s: %s", t.rec.VMName, t.rec.Error))
		default:
			cancelled++
		}
	}
	j.mu.Unlock()
	if ok > 0 && j.ctx.Err() == nil {
		j.applyRetention(ctx)
	}
	j.retainKeptStorage(ctx)
	rec := &j.record
	rec.TasksTotal, rec.TasksOK, rec.TasksFail = len(j.tasks), ok, failed
	rec.FinishedAt = time.Now()
	sort.Strings(failures)
	problems := append(append([]string(nil), j.problems...), failures...)
	// Cancelled before every VM was done (or before there were VMs).
	interrupted := j.ctx.Err() != nil && (cancelled > 0 || len(j.tasks) == 0)
	switch {
	case interrupted && errors.Is(context.Cause(j.ctx), ErrInterrupted):
		rec.Status = catalog.StatusFailed
		rec.Error = fmt.Sprintf("%v: %d VMs done, %d failed, %d not finished", context.Cause(j.ctx), ok, failed, cancelled)
	case interrupted || errors.Is(context.Cause(j.ctx), ErrCancelled):
		rec.Status = catalog.StatusCancelled
		rec.Error = fmt.Sprintf("cancelled (%v): %d VMs done, %d failed, %d not finished", context.Cause(j.ctx), ok, failed, cancelled)
	case len(problems) == 0:
		rec.Status = catalog.StatusSuccess
	case ok > 0:
		rec.Status = catalog.StatusPartial
		rec.Error = fmt.Sprintf("%d of %d VMs failed: %s", failed, len(j.tasks), strings.Join(problems, "; "))
	default:
		rec.Status = catalog.StatusFailed
		rec.Error = strings.Join(problems, "; ")
	}
	j.event(levelOf(rec.Status), "job-end", fmt.Sprintf("%s: %d ok, %d failed, %d cancelled in %s", rec.Status, ok, failed, cancelled,
		rec.FinishedAt.Sub(rec.StartedAt).Round(time.Millisecond)), map[string]any{
		"ok": ok, "failed": failed, "cancelled": cancelled, "seconds": rec.FinishedAt.Sub(rec.StartedAt).Seconds()})
	var errs []error
	if err := j.rec.close(ctx); err != nil {
		errs = append(errs, err)
	}
	j.run.Progress(j.Progress().sample())
	j.run.SetCounts(rec.TasksTotal, ok, failed)
	fin, err := j.run.Finish(ctx, rec.Status, rec.Error)
	if err != nil {
		errs = append(errs, err)
	}
	res := &Result{Job: fin}
	j.mu.Lock()
	for _, t := range j.tasks {
		res.Tasks = append(res.Tasks, t.rec)
	}
	j.mu.Unlock()
	j.result, j.err = res, errors.Join(errs...)
}

func levelOf(s catalog.Status) string {
	switch s {
	case catalog.StatusSuccess:
		return "info"
	case catalog.StatusFailed:
		return "error"
	}
	return "warn"
}

func nameOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
