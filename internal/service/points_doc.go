package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/bootverify"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/rebuild"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/service/apidoc"
	"github.com/coffer-backup/coffer/internal/store"
)

func JobDoc(j catalog.Job, tasks []catalog.Task, events []catalog.Event) api.Job {
	d := api.Job{ID: j.ID, Kind: j.Kind, Policy: j.Policy, Repository: j.Repository, Status: string(j.Status), Worker: j.Worker,
		Started: j.StartedAt, Finished: j.FinishedAt, DurationSeconds: seconds(j.StartedAt, j.FinishedAt),
		TasksTotal: j.TasksTotal, TasksOK: j.TasksOK, TasksFailed: j.TasksFail, Error: j.Error,
		Object: j.Object, VM: j.VM, User: j.User, Token: j.Token, OwnerHost: j.Owner.Host, OwnerPID: j.Owner.PID,
		Heartbeat: j.Heartbeat, CancelRequested: j.CancelRequested, LogLines: j.LogLines}
	if p := j.Progress; p != (catalog.Progress{}) {
		d.Progress = &api.TaskProgress{DoneBytes: p.BytesDone, TotalBytes: p.BytesTotal, RateBytesPerSecond: p.BytesPerSecond,
			ETASeconds: p.ETA.Seconds(), ItemsDone: p.ItemsDone, ItemsTotal: p.ItemsTotal}
	}
	if tasks != nil {
		d.Tasks = []api.VMTask{}
		for _, t := range tasks {
			d.Tasks = append(d.Tasks, vmTaskDoc(t))
		}
	}
	if events != nil {
		d.Events = []api.Event{}
		for _, e := range events {
			d.Events = append(d.Events, EventDoc(e))
		}
	}
	return d
}

func EventDoc(e catalog.Event) api.Event {
	return api.Event{Seq: e.Seq, Time: e.Time, TaskID: e.TaskID, Level: e.Level, Kind: e.Kind, Message: e.Message, Fields: e.Fields}
}

func vmTaskDoc(t catalog.Task) api.VMTask {
	d := api.VMTask{ID: t.ID, Connection: t.Connection, VM: t.VMName, VMID: t.VMID, Host: t.Host,
		Datastores: apidoc.NonNil(t.Datastores), Status: string(t.Status), Mode: t.Mode, SnapshotMode: t.SnapshotMode, Attempts: t.Attempts,
		Started: t.StartedAt, Finished: t.FinishedAt, DurationSeconds: seconds(t.StartedAt, t.FinishedAt), LogicalBytes: t.BytesLogical,
		ReadBytes: t.BytesRead, StoredBytes: t.BytesStored, PointID: t.BackupPointID, Warnings: apidoc.NonNil(t.Warnings), Error: t.Error}
	if t.BackupPointID != "" {
		d.SnapshotModeAchieved = api.AchievedMode(t.SnapshotModeAchieved)
	}
	return d
}

func seconds(from, to time.Time) float64 {
	if from.IsZero() || to.IsZero() {
		return 0
	}
	return to.Sub(from).Seconds()
}

// InCatalog brings the catalog in step with a change of the repository.
// The repository stays the source of truth: a failure is a warning that
// says how to mend the catalog, returned for the result document and
// logged, never the operation's error.
func (s *Service) InCatalog(ctx context.Context, what string, change func(context.Context, catalog.Catalog) error) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), catalogTimeout)
	defer cancel()
	c, err := s.OpenCatalog(ctx)
	if err == nil {
		err = change(ctx, c)
		_ = c.Close()
	}
	if err == nil {
		return ""
	}
	s.log.Warn(what+" not recorded in the catalog (run `coffer catalog rebuild`)", "err", err)
	return fmt.Sprintf("%s not recorded in the catalog (%v); `coffer catalog rebuild` mends it", what, err)
}

// RecordPoint records a new backup point in the catalog.
func (s *Service) RecordPoint(ctx context.Context, r *repo.Repository, snap *repo.Point) string {
	if snap == nil {
		return ""
	}
	return s.InCatalog(ctx, "backup point "+snap.ID.Short(), func(ctx context.Context, c catalog.Catalog) error {
		return rebuild.Record(ctx, c, r, snap)
	})
}

// BootSummaries reads the stored boot verifications of r for point
// listings, keyed by point ID.
// A listing that cannot read them still lists the points, without the
// column.
func BootSummaries(ctx context.Context, r *repo.Repository, log *slog.Logger) map[string]*api.BootSummary {
	docs, err := r.BootVerifications(ctx)
	out := map[string]*api.BootSummary{}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		log.Warn("boot verifications not read", "err", err)
		return out
	}
	for x, b := range docs {
		if res, err := bootverify.Decode(b); err == nil {
			out[x.String()] = &api.BootSummary{Passed: res.Passed, FailedStep: res.FailedStep, Time: res.Started,
				CannotVerify: res.CannotVerify}
		}
	}
	return out
}
