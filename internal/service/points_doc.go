package service

import (
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/repo"
)

// pointDoc is the document of a point read from the repository whose ID is
// repositoryID.
func pointDoc(repositoryID string, s *repo.Point) api.BackupPoint {
	p := api.BackupPoint{ID: s.ID.String(), ShortID: s.ID.Short(), Repository: repositoryID, Time: s.Time,
		VM: s.Source.VMName, VMID: s.Source.VMID, Connection: s.Source.Connection, SourceKind: s.Source.Kind, Host: s.Host,
		Mode: s.Mode, SnapshotMode: s.SnapshotMode, SnapshotModeAchieved: api.AchievedMode(s.SnapshotModeAchieved), Hooks: s.Hooks,
		Parent: s.Parent, Tags: tags(s.Tags), Protected: s.Protected, LockedUntil: s.RetainUntil, JobID: s.JobID,
		DiskCount: len(s.Disks), LogicalBytes: s.Logical(), StoredBytes: s.BytesStored, ReadBytes: s.BytesRead,
		NewBytes: s.BytesNew, DurationSeconds: s.Duration, Disks: []api.PointDisk{}, Warnings: list(s.Warnings)}
	for _, d := range s.Disks {
		p.Disks = append(p.Disks, api.PointDisk{Key: d.Key, Name: d.Name, Kind: nameOr(d.Kind, "disk"), SizeBytes: d.Size,
			ChunkSizeBytes: d.ChunkSize, Format: d.Format, Path: d.Path, Mode: d.Mode, Warning: d.Warning,
			ReadBytes: d.BytesRead, ZeroBytes: d.BytesZero, NewBytes: d.BytesNew, LostSpans: d.LostSpans})
	}
	return p
}

// catalogPointDoc is the document of a point the catalog recorded. The
// catalog keeps fewer fields than the manifest: what it lacks is left out.
func catalogPointDoc(p catalog.BackupPoint) api.BackupPoint {
	return api.BackupPoint{ID: p.ID, ShortID: short(p.ID), Repository: p.Repository, Time: p.Time,
		VM: p.VMName, VMID: p.VMID, Connection: p.Connection, SourceKind: sourceKind(p),
		Mode: p.Mode, SnapshotMode: p.SnapshotMode, SnapshotModeAchieved: api.AchievedMode(p.SnapshotModeAchieved), Hooks: p.Hooks,
		Parent: p.Parent, Tags: tags(p.Tags), Protected: p.Protected, JobID: p.JobID, DiskCount: p.Disks,
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

func jobDoc(j catalog.Job, tasks []catalog.Task, events []catalog.Event) api.Job {
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
			d.Events = append(d.Events, eventDoc(e))
		}
	}
	return d
}

func eventDoc(e catalog.Event) api.Event {
	return api.Event{Seq: e.Seq, Time: e.Time, TaskID: e.TaskID, Level: e.Level, Kind: e.Kind, Message: e.Message, Fields: e.Fields}
}

func vmTaskDoc(t catalog.Task) api.VMTask {
	d := api.VMTask{ID: t.ID, Connection: t.Connection, VM: t.VMName, VMID: t.VMID, Host: t.Host,
		Datastores: list(t.Datastores), Status: string(t.Status), Mode: t.Mode, SnapshotMode: t.SnapshotMode, Attempts: t.Attempts,
		Started: t.StartedAt, Finished: t.FinishedAt, DurationSeconds: seconds(t.StartedAt, t.FinishedAt), LogicalBytes: t.BytesLogical,
		ReadBytes: t.BytesRead, StoredBytes: t.BytesStored, PointID: t.BackupPointID, Warnings: list(t.Warnings), Error: t.Error}
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

// list returns l, or an empty list for nil: documents print [] rather than
// null.
func list[T any](l []T) []T {
	if l == nil {
		return []T{}
	}
	return l
}

func tags(t map[string]string) map[string]string {
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
