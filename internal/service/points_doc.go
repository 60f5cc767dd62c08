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
	"github.com/coffer-backup/coffer/internal/forget"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/retention"
	"github.com/coffer-backup/coffer/internal/store"
)

// PointDoc is the document of a point read from the repository whose ID is
// RepositoryID.
func PointDoc(repositoryID string, s *repo.Point) api.BackupPoint {
	p := api.BackupPoint{ID: s.ID.String(), ShortID: s.ID.Short(), Repository: repositoryID, Time: s.Time,
		VM: s.Source.VMName, VMID: s.Source.VMID, Connection: s.Source.Connection, SourceKind: s.Source.Kind, Host: s.Host,
		Mode: s.Mode, SnapshotMode: s.SnapshotMode, SnapshotModeAchieved: api.AchievedMode(s.SnapshotModeAchieved), Hooks: s.Hooks,
		Parent: s.Parent, Tags: NonNilTags(s.Tags), Protected: s.Protected, LockedUntil: s.RetainUntil, JobID: s.JobID,
		DiskCount: len(s.Disks), LogicalBytes: s.Logical(), StoredBytes: s.BytesStored, ReadBytes: s.BytesRead,
		NewBytes: s.BytesNew, DurationSeconds: s.Duration, Disks: []api.PointDisk{}, Warnings: NonNil(s.Warnings)}
	for _, d := range s.Disks {
		p.Disks = append(p.Disks, api.PointDisk{Key: d.Key, Name: d.Name, Kind: nameOr(d.Kind, "disk"), SizeBytes: d.Size,
			ChunkSizeBytes: d.ChunkSize, Format: d.Format, Path: d.Path, Mode: d.Mode, Warning: d.Warning,
			ReadBytes: d.BytesRead, ZeroBytes: d.BytesZero, NewBytes: d.BytesNew, LostSpans: d.LostSpans})
	}
	return p
}

// CatalogPointDoc is the document of a point the catalog recorded. The
// catalog keeps fewer fields than the manifest: what it lacks is left out.
func CatalogPointDoc(p catalog.BackupPoint) api.BackupPoint {
	return api.BackupPoint{ID: p.ID, ShortID: short(p.ID), Repository: p.Repository, Time: p.Time,
		VM: p.VMName, VMID: p.VMID, Connection: p.Connection, SourceKind: sourceKind(p),
		Mode: p.Mode, SnapshotMode: p.SnapshotMode, SnapshotModeAchieved: api.AchievedMode(p.SnapshotModeAchieved), Hooks: p.Hooks,
		Parent: p.Parent, Tags: NonNilTags(p.Tags), Protected: p.Protected, JobID: p.JobID, DiskCount: p.Disks,
		LogicalBytes: p.BytesLogical, StoredBytes: p.BytesStored}
}

// sourceKind: the catalog does not record the source's kind, but a point
// without a connection is a disk image's.
func sourceKind(p catalog.BackupPoint) string {
	if p.Connection == "" {
		return "disk"
	}
	return ""
}

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
		Datastores: NonNil(t.Datastores), Status: string(t.Status), Mode: t.Mode, SnapshotMode: t.SnapshotMode, Attempts: t.Attempts,
		Started: t.StartedAt, Finished: t.FinishedAt, DurationSeconds: seconds(t.StartedAt, t.FinishedAt), LogicalBytes: t.BytesLogical,
		ReadBytes: t.BytesRead, StoredBytes: t.BytesStored, PointID: t.BackupPointID, Warnings: NonNil(t.Warnings), Error: t.Error}
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

// NonNil returns l, or an empty list for nil: documents print [] rather than
// null.
func NonNil[T any](l []T) []T {
	if l == nil {
		return []T{}
	}
	return l
}

func NonNilTags(t map[string]string) map[string]string {
	if t == nil {
		return map[string]string{}
	}
	return t
}

func short(s string) string {
	if len(s) > 8 {
		return s[:8]
	}
	return s
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

// KeepPolicy is a request's keep rules as retention applies them.
func KeepPolicy(k api.KeepRules) retention.Policy {
	return retention.Policy{Last: k.Last, Hourly: k.Hourly, Daily: k.Daily, Weekly: k.Weekly, Monthly: k.Monthly, Yearly: k.Yearly,
		Within: k.Within()}
}

// KeepRules is a retention policy as a request states it (schedules run
// forget with a policy's retention).
func KeepRules(p retention.Policy) api.KeepRules {
	return api.KeepRules{Last: p.Last, Hourly: p.Hourly, Daily: p.Daily, Weekly: p.Weekly, Monthly: p.Monthly, Yearly: p.Yearly,
		WithinSeconds: p.Within.Seconds()}
}

// ForgetDocs turns forget's verdicts into documents; the points under
// object lock are named with their lock's end.
func ForgetDocs(groups []forget.Group) []api.ForgetSource {
	out := []api.ForgetSource{}
	for _, g := range groups {
		src := api.ForgetSource{VM: g.Source.VMName, VMID: g.Source.VMID, Connection: g.Source.Connection, SourceKind: g.Source.Kind,
			Keep: verdicts(g.Keep), Remove: verdicts(g.Remove), Locked: []api.LockedPoint{}}
		for _, l := range g.Locked {
			src.Locked = append(src.Locked, api.LockedPoint{PointID: l.ID, LockedUntil: l.Until})
		}
		out = append(out, src)
	}
	return out
}

func verdicts(ds []retention.Decision) []api.PointVerdict {
	out := []api.PointVerdict{}
	for _, d := range ds {
		out = append(out, api.PointVerdict{PointID: d.ID, Time: d.Time, Protected: d.Protected, Reasons: NonNil(d.Reasons)})
	}
	return out
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
