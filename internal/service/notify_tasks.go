package service

import (
	"context"
	"strconv"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/notify"
	"github.com/coffer-backup/coffer/internal/task"
)

// taskFinished tells the notification targets how a task ended (task
// failed, or task succeeded, which is routed only where a matcher asks
// for it). It runs as the task manager records each end, so policy runs,
// restores, verifies, gc, copies and the rest are reported alike, from
// the command line as from the server. A run of a policy names the VMs
// that failed.
func (s *Service) taskFinished(ctl *control, j task.Task) {
	if ctl.notifier == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
	defer cancel()
	d := notify.TaskDetails{Kind: notifyKind(j.Kind), ID: strconv.FormatInt(j.ID, 10), Status: string(j.Status),
		StartedAt: j.StartedAt, FinishedAt: j.FinishedAt, Error: j.Error}
	subject := notify.Subject{Policy: j.Policy, Repository: j.Repository, VM: j.VM}
	if j.Kind == catalog.KindBackupPolicy {
		d.VMsTotal = j.TasksTotal
		if tasks, err := ctl.cat.ListTasks(ctx, catalog.TaskFilter{JobID: j.ID}); err == nil {
			for _, t := range tasks {
				d.BytesStored += t.BytesStored
				if t.Status == catalog.StatusFailed {
					d.FailedVMs = append(d.FailedVMs, t.VMName)
				}
			}
		}
	}
	if err := ctl.notifier.Emit(ctx, notify.TaskFinished(subject, d)); err != nil {
		s.log.Warn("recording the notification of a task's end failed", "task", j.ID, "err", err)
	}
}

// notifyKind is a task kind as notifications name it.
func notifyKind(kind string) notify.TaskKind {
	switch kind {
	case catalog.KindBackupPolicy:
		return notify.KindBackupJob
	case catalog.KindRestore, catalog.KindRestoreVM, catalog.KindRestoreFiles:
		return notify.KindRestore
	}
	return notify.TaskKind(kind)
}
