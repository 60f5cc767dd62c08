package service

import (
	"context"
	"log/slog"
	"time"
)

// ScheduleUser is the user of the tasks the server's schedules start.
const ScheduleUser = "@schedule"

// ScheduleNote is what a scheduled run's tasks write first in their logs.
type ScheduleNote struct {
	Name         string
	Slot, Window time.Time
	// Missed: the slot passed while every server was down, and this run
	// catches it up at start (missed: run-once).
	Missed bool
}

type scheduleKey struct{}

func WithSchedule(ctx context.Context, n ScheduleNote) context.Context {
	return context.WithValue(ctx, scheduleKey{}, n)
}

// NoteSchedule logs, for a task started by a schedule, which run it is.
func noteSchedule(ctx context.Context, t Job) {
	n, ok := ctx.Value(scheduleKey{}).(ScheduleNote)
	if !ok {
		return
	}
	args := []any{"schedule", n.Name, "slot", n.Slot.UTC().Format(time.RFC3339)}
	if !n.Window.IsZero() {
		args = append(args, "window_ends", n.Window.UTC().Format(time.RFC3339))
	}
	msg := "scheduled run of " + n.Slot.UTC().Format(time.RFC3339)
	if n.Missed {
		args = append(args, "missed", true)
		msg += ", missed while every server was down: caught up at start"
	}
	t.Log(slog.LevelInfo, msg, args...)
}

type jobVMKey struct{}

// WithJobVM returns ctx naming the VM the task an operation starts acts
// on, when the caller knows it and the input does not say (the schedules'
// boot verifications, which boot a VM's point by its ID): it fills the
// task's VM column, not a request's to set.
func WithJobVM(ctx context.Context, vm string) context.Context {
	return context.WithValue(ctx, jobVMKey{}, vm)
}

func jobVM(ctx context.Context) string {
	vm, _ := ctx.Value(jobVMKey{}).(string)
	return vm
}
