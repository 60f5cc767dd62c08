package service

import (
	"context"
	"log/slog"
)

// Tasks shows long operations (backups, restores, verify, gc, copy,
// forget, instant recovery) as they run: the command line draws progress
// bars and prints warnings, the server logs. The service records each of
// them in the catalog as well (internal/task, see StartTask), where any
// process lists them, pages through their logs and cancels them.
type Tasks interface {
	// Start begins a task of the given kind ("verify", "restore", ...) on
	// an object ("repository", a point ID, a VM). The returned context is
	// the operation's: cancelling the task cancels it.
	Start(ctx context.Context, kind, object string) (context.Context, Task)
}

// Task is one running operation.
type Task interface {
	// Log adds a line to the task's log; warnings are things the user
	// must know about the result.
	Log(level slog.Level, msg string, args ...any)
	// Progress says how to read the operation's progress from now on
	// (it replaces the previous meter); the implementation polls it.
	Progress(m Meter)
	// Finish ends the task with the operation's outcome.
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

// LocalTasks shows tasks in a logger only: the display of a face that
// draws no progress (the server's). Every task is recorded in the
// catalog by the service whatever its display (tasks_recorded.go).
type LocalTasks struct{ Logger *slog.Logger }

// Start implements Tasks.
func (l LocalTasks) Start(ctx context.Context, kind, object string) (context.Context, Task) {
	log := l.Logger
	if log == nil {
		log = slog.Default()
	}
	return ctx, localTask{log: log.With("task", kind, "object", object), ctx: ctx}
}

type localTask struct {
	log *slog.Logger
	ctx context.Context
}

func (t localTask) Log(level slog.Level, msg string, args ...any) {
	t.log.Log(t.ctx, level, msg, args...)
}
func (t localTask) Progress(Meter) {}
func (t localTask) Finish(err error) {
	if err != nil {
		t.log.Debug("task failed", "err", err)
	}
}
