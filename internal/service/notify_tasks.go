package service

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/notify"
)

// taskFinished tells the notification targets how a task ended (task
// failed, or task succeeded, which is routed only where a matcher asks
// for it). It runs as the task manager records each end, so policy runs,
// restores, verifies, gc, copies and the rest are reported alike, from
// the command line as from the server. A run of a policy names the VMs
// that failed.
func (s *Service) taskFinished(ctl *Control, j job.Record) {
	if ctl.Notifier == nil && s.Config.Metrics == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
	defer cancel()
	var vms []catalog.Task
	if j.Kind == catalog.KindBackupPolicy {
		var err error
		if vms, err = ctl.Catalog.ListTasks(ctx, catalog.TaskFilter{JobID: j.ID}); err != nil {
			s.log.Warn("reading the VM tasks of a finished job failed", "job", j.ID, "err", err)
		}
	}
	if s.Config.Metrics != nil {
		s.Config.Metrics.ObserveTask(j, vms)
	}
	if ctl.Notifier == nil {
		return
	}
	d := notify.TaskDetails{Kind: notifyKind(j.Kind), ID: strconv.FormatInt(j.ID, 10), Status: string(j.Status),
		StartedAt: j.StartedAt, FinishedAt: j.FinishedAt, Error: j.Error}
	subject := notify.Subject{Policy: j.Policy, Repository: j.Repository, VM: j.VM}
	if j.Kind == catalog.KindBackupPolicy {
		d.VMsTotal = j.TasksTotal
		for _, t := range vms {
			d.BytesStored += t.BytesStored
			if t.Status == catalog.StatusFailed {
				d.FailedVMs = append(d.FailedVMs, t.VMName)
			}
		}
	}
	if err := ctl.Emit(ctx, notify.TaskFinished(subject, d)); err != nil {
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

// EmitDamage tells the notification targets what a verify found: whether
// points lost data, which ones, and what mends it.
func (s *Service) EmitDamage(ctx context.Context, repository string, doc *api.VerifyReport) {
	d := notify.DamageDetails{Findings: len(doc.Problems)}
	lost := map[string]bool{}
	var repairs []string
	for _, p := range doc.Problems {
		if p.Repair != "" && !slices.Contains(repairs, p.Repair) {
			repairs = append(repairs, p.Repair)
		}
		if !p.DataLoss {
			continue
		}
		d.DataLost = true
		for _, a := range p.Affects {
			if a.PointID != "" && !lost[a.PointID] {
				lost[a.PointID] = true
				d.Points = append(d.Points, a.PointID)
			}
		}
	}
	for _, dp := range doc.DamagedPoints {
		if d.DataLost && !lost[dp.PointID] {
			lost[dp.PointID] = true
			d.Points = append(d.Points, dp.PointID)
		}
	}
	d.Repair = strings.Join(repairs, "; ")
	d.Summary = fmt.Sprintf("%d problem(s); %d point(s) damaged, %d intact", len(doc.Problems), len(doc.DamagedPoints), doc.IntactPoints)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), catalogTimeout)
	defer cancel()
	if err := s.Emitter(ctx).Emit(ctx, notify.VerifyDamage(notify.Subject{Repository: repository}, d, time.Now())); err != nil {
		s.log.Warn("recording the notification of damage failed", "repository", repository, "err", err)
	}
}
