package jobops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"context"
	"errors"
	"fmt"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/job"
)

// Jobs are the control plane's tasks (internal/job): every long
// operation and every policy run, with its paged log, its live events and
// a cancel that reaches it in whichever process runs it.

// withTasks runs fn with the service's task manager (opened with the
// catalog at first use, see control.go).
func (s Ops) withTasks(ctx context.Context, fn func(*job.Manager) error) error {
	m, err := s.JobManager(ctx)
	if err != nil {
		return err
	}
	return fn(m)
}

// taskError gives the task package's errors their classes.
func taskError(id int64, err error) error {
	switch {
	case errors.Is(err, job.ErrNotFound):
		return api.Errorf(api.NotFound, "no job %d (coffer jobs lists them)", id)
	case errors.Is(err, job.ErrFinished):
		return api.WithClass(api.Conflict, err)
	case errors.Is(err, job.ErrInvalid):
		return api.WithClass(api.Invalid, err)
	}
	return err
}

// JobLog returns lines of a job's log the caller may see, in order.
func (s Ops) JobLog(ctx context.Context, in *api.JobLogInput) ([]api.Event, error) {
	if _, err := visibleJob(ctx, s, in.ID); err != nil {
		return nil, err
	}
	var lines []job.Line
	err := s.withTasks(ctx, func(m *job.Manager) error {
		if _, err := m.Get(ctx, in.ID); err != nil {
			return err
		}
		var err error
		lines, err = m.Log(ctx, in.ID, in.Start, in.Limit)
		return err
	})
	if err != nil {
		return nil, taskError(in.ID, err)
	}
	return eventDocs(lines), nil
}

func eventDocs(lines []catalog.Event) []api.Event {
	out := []api.Event{}
	for _, l := range lines {
		out = append(out, service.EventDoc(l))
	}
	return out
}

// CancelJob asks a queued or running job to stop, wherever it runs; it
// returns the job as it is then. The caller must be allowed to
// (canCancelJob).
func (s Ops) CancelJob(ctx context.Context, in *api.CancelJobInput) (*api.Job, error) {
	id := in.ID
	sum, err := s.JobSummary(ctx, id)
	if err != nil {
		return nil, err
	}
	if !canCancelJob(s.Actor(ctx), *sum) {
		return nil, api.Errorf(api.Denied, "%s may not cancel job %d: it is another user's, and %s lacks %s on %s or %s on its policy",
			s.Actor(ctx), sum.ID, s.Actor(ctx), auth.SysModify, TasksPath, auth.PolicyRun)
	}
	var j job.Record
	err = s.withTasks(ctx, func(m *job.Manager) error {
		var err error
		j, err = m.Cancel(ctx, id, s.Actor(ctx).String())
		return err
	})
	if err != nil {
		return nil, taskError(id, err)
	}
	doc := service.JobDoc(j, nil, nil)
	return &doc, nil
}

// FollowJob calls each with a job's events as they are recorded: its
// state first, then its log from the line after `after`, then every
// change, until the job ends (its final state is the last event), ctx
// ends or each fails.
func (s Ops) FollowJob(ctx context.Context, id, after int64, each func(api.JobEvent) error) error {
	return taskError(id, s.withTasks(ctx, func(m *job.Manager) error {
		sub, err := m.Subscribe(ctx, id, after)
		if err != nil {
			return err
		}
		defer sub.Close()
		for ev := range sub.C {
			doc := api.JobEvent{Type: ev.Type, JobID: ev.JobID}
			switch ev.Type {
			case job.EventLog:
				line := service.EventDoc(ev.Line)
				doc.Line = &line
			default:
				j := service.JobDoc(ev.Job, nil, nil)
				doc.Job = &j
			}
			if err := each(doc); err != nil {
				return err
			}
		}
		if err := sub.Err(); err != nil {
			return fmt.Errorf("following job %d: %w", id, err)
		}
		return ctx.Err()
	}))
}
