package service

import (
	"context"
	"log/slog"
)

// Display shows long operations (backups, restores, verify, gc, copy,
// forget, instant recovery) as they run: the command line draws progress
// bars and prints warnings, the server logs. The service records each of
// them in the catalog as well (internal/job, see StartJob), where any
// process lists them, pages through their logs and cancels them.
type Display interface {
	// Start begins a job of the given kind ("verify", "restore", ...) on
	// an object ("repository", a point ID, a VM). The returned context is
	// the operation's: cancelling the job cancels it.
	Start(ctx context.Context, kind, object string) (context.Context, Job)
}

// Job is one running operation.
type Job interface {
	// Log adds a line to the job's log; warnings are things the user
	// must know about the result.
	Log(level slog.Level, msg string, args ...any)
	// Progress says how to read the operation's progress from now on
	// (it replaces the previous meter); the implementation polls it.
	Progress(m Meter)
	// Finish ends the job with the operation's outcome.
	Finish(err error)
}

// Meter reads the progress of (one step of) an operation.
type Meter struct {
	Label       string
	Done, Total func() int64
	// Detail is a short text beside the figures (nil: none).
	Detail func() string
	// Items: Done and Total count things (packs, files), not bytes.
	Items bool
}

// LogDisplay shows jobs in a logger only: the display of a face that
// draws no progress (the server's). Every job is recorded in the
// catalog by the service whatever its display (jobs_recorded.go).
type LogDisplay struct{ Logger *slog.Logger }

// Start implements Display.
func (l LogDisplay) Start(ctx context.Context, kind, object string) (context.Context, Job) {
	log := l.Logger
	if log == nil {
		log = slog.Default()
	}
	return ctx, loggedJob{log: log.With("task", kind, "object", object), ctx: ctx}
}

type loggedJob struct {
	log *slog.Logger
	ctx context.Context
}

func (t loggedJob) Log(level slog.Level, msg string, args ...any) {
	t.log.Log(t.ctx, level, msg, args...)
}
func (t loggedJob) Progress(Meter) {}
func (t loggedJob) Finish(err error) {
	if err != nil {
		t.log.Debug("task failed", "err", err)
	}
}
