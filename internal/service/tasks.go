package service

import (
	"context"
	"log/slog"

	"github.com/coffer-backup/coffer/internal/auth"
)

// Tasks records long operations (backups, restores, verify, gc, copy,
// forget, instant recovery): their log, progress and outcome. The command
// line shows them as they run (progress bars, warnings on stderr); the
// server records them in the catalog (internal/task), where the API pages
// through their logs and cancels them.
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
}

// LocalTasks logs task lines to a logger and keeps nothing: enough for a
// process that shows no progress.
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

// run runs op as a task: it starts the task, hands op the task and its
// context, and finishes the task with op's error.
//
// The task's object is an ACL path: the repository's for every operation
// on one ("/repositories/main"); what the operation names within it (a
// point, a VM) is the task's first log line.
func run[T any](ctx context.Context, s *Service, kind, what string, op func(context.Context, Task) (T, error)) (T, error) {
	ctx, t := s.tasks.Start(ctx, kind, auth.RepositoryPath(s.repoName))
	if what != "" && what != "repository" {
		t.Log(slog.LevelInfo, kind+" "+what)
	}
	out, err := op(ctx, t)
	t.Finish(err)
	return out, err
}
