package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/repo"
)

// JobRun is a job while it runs: its record, log, progress and end. The
// control plane's task manager (internal/job's *Handle, through
// Options.StartJob) makes every job a task: cancellable from any process,
// followed live, marked interrupted if its process dies. Without one the
// engine records the job in the catalog itself (directRun).
type JobRun interface {
	// Job is the job's record as created (with its ID).
	Job() catalog.Job
	// Context ends when the job is cancelled (from any process, with a
	// task manager).
	Context() context.Context
	// Record appends events to the job's log; it does not block on the
	// catalog.
	Record(events ...catalog.Event)
	// Progress records a progress sample.
	Progress(p catalog.Progress)
	// SetCounts sets the counts of VMs: total, backed up, failed.
	SetCounts(total, ok, failed int)
	// Finish writes what is queued and ends the job.
	Finish(ctx context.Context, status catalog.Status, msg string) (catalog.Job, error)
}

// Starter adapts a task manager's StartJob, whose handles are JobRuns, to
// Options.StartJob:
//
//	engine.Options{..., StartJob: engine.Starter(tasks.StartJob)}
func Starter[R JobRun](start func(context.Context, catalog.Job) (R, error)) func(context.Context, catalog.Job) (JobRun, error) {
	return func(ctx context.Context, j catalog.Job) (JobRun, error) {
		r, err := start(ctx, j)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
}

// startRun starts recording a job, through the task manager when there is
// one.
func (e *Engine) startRun(ctx context.Context, j catalog.Job) (JobRun, error) {
	if e.o.StartJob != nil {
		return e.o.StartJob(ctx, j)
	}
	return startDirect(ctx, e.o.Catalog, e.log, e.o.FlushInterval, j)
}

// directRun records a job straight in the catalog, its events batched by
// a recorder. At every flush it also writes its progress and a heartbeat
// and reads the job's cancel request, so that without a task manager a
// job still shows its progress, is seen alive by other processes (it
// records this process as its owner), and stops when cancelled from
// elsewhere, within a flush interval.
type directRun struct {
	cat    catalog.Catalog
	ctx    context.Context
	cancel context.CancelCauseFunc
	log    *slog.Logger
	rec    *recorder

	mu         sync.Mutex
	job        catalog.Job
	warnedGone bool
}

func startDirect(ctx context.Context, cat catalog.Catalog, log *slog.Logger, interval time.Duration, j catalog.Job) (*directRun, error) {
	j.Owner, j.Heartbeat = thisProcess(), time.Now()
	if err := cat.CreateJob(ctx, &j); err != nil {
		return nil, fmt.Errorf("record job: %w", err)
	}
	r := &directRun{cat: cat, log: log, job: j}
	r.ctx, r.cancel = context.WithCancelCause(ctx)
	r.rec = newRecorder(cat, log, interval, r.beat)
	return r, nil
}

// thisProcess is the owner of the jobs this process runs.
func thisProcess() catalog.Owner {
	host, _ := os.Hostname()
	start, _ := repo.ProcessStart(os.Getpid())
	return catalog.Owner{Host: host, PID: os.Getpid(), Start: start}
}

// beat writes the progress and a heartbeat, and stops the job when a
// cancel was requested.
func (r *directRun) beat(ctx context.Context) error {
	r.mu.Lock()
	p := r.job.Progress
	r.mu.Unlock()
	cancelAt, err := r.cat.Heartbeat(ctx, r.job.ID, &p)
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		// Another process judged this one gone and ended the job; its
		// real end is recorded when it finishes.
		r.mu.Lock()
		warned := r.warnedGone
		r.warnedGone = true
		r.mu.Unlock()
		if !warned {
			r.log.Warn("another process marked this running job as ended; its end will be recorded when it finishes", "job", r.job.ID)
		}
		return nil
	case err == nil && !cancelAt.IsZero():
		r.cancel(ErrCancelled)
	}
	return err
}

func (r *directRun) Job() catalog.Job {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.job
}

func (r *directRun) Context() context.Context { return r.ctx }

func (r *directRun) Record(events ...catalog.Event) {
	for _, e := range events {
		e.JobID = r.job.ID
		r.rec.event(e)
	}
}

func (r *directRun) Progress(p catalog.Progress) {
	r.mu.Lock()
	r.job.Progress = p
	r.mu.Unlock()
}

func (r *directRun) SetCounts(total, ok, failed int) {
	r.mu.Lock()
	r.job.TasksTotal, r.job.TasksOK, r.job.TasksFail = total, ok, failed
	r.mu.Unlock()
}

func (r *directRun) Finish(ctx context.Context, status catalog.Status, msg string) (catalog.Job, error) {
	defer r.cancel(nil)
	err := r.rec.close(ctx) // the last heartbeat: no more

	r.mu.Lock()
	r.job.Status, r.job.Error, r.job.FinishedAt = status, msg, time.Now()
	j := r.job
	r.mu.Unlock()
	if uerr := r.cat.UpdateJob(ctx, &j); uerr != nil {
		err = errors.Join(err, fmt.Errorf("record job result: %w", uerr))
	}
	return j, err
}
