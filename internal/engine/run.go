package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// JobRun is a job while it runs: its record, log, progress and end. The
// control plane's task manager (internal/task's *Handle, through
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

// startRun starts recording a job, through the task manager when there is
// one.
func (e *Engine) startRun(ctx context.Context, j catalog.Job) (JobRun, error) {
	if e.o.StartJob != nil {
		return e.o.StartJob(ctx, j)
	}
	return startDirect(ctx, e.o.Catalog, e.log, e.o.FlushInterval, j)
}

// directRun records a job straight in the catalog, its events batched by
// a recorder; it is cancelled only through its context.
type directRun struct {
	cat catalog.Catalog
	ctx context.Context
	rec *recorder

	mu  sync.Mutex
	job catalog.Job
}

func startDirect(ctx context.Context, cat catalog.Catalog, log *slog.Logger, interval time.Duration, j catalog.Job) (*directRun, error) {
	if err := cat.CreateJob(ctx, &j); err != nil {
		return nil, fmt.Errorf("record job: %w", err)
	}
	return &directRun{cat: cat, ctx: ctx, rec: newRecorder(cat, log, interval), job: j}, nil
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
	err := r.rec.close(ctx)
	r.mu.Lock()
	r.job.Status, r.job.Error, r.job.FinishedAt = status, msg, time.Now()
	j := r.job
	r.mu.Unlock()
	if uerr := r.cat.UpdateJob(ctx, &j); uerr != nil {
		err = errors.Join(err, fmt.Errorf("record job result: %w", uerr))
	}
	return j, err
}
