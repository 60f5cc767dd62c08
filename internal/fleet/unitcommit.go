package fleet

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/postgres"
	"github.com/coffer-backup/coffer/internal/fleet/queue"
	"github.com/coffer-backup/coffer/internal/repo"
)

// unitEnd is what a unit that committed pt to repository repoID records
// in the catalog with its job's completion: the task's end and the point,
// the rows the leader's engine would write (engine's task.succeed), under
// the worker's registration.
func unitEnd(u queue.VMUnit, repoID string, pt *repo.Point, now time.Time) postgres.UnitEnd {
	return postgres.UnitEnd{Worker: u.Worker, Epoch: u.Epoch,
		Task: catalog.Task{ID: u.Task, JobID: u.Job, Attempts: u.Attempt, Status: catalog.StatusSuccess, FinishedAt: now,
			BackupPointID: pt.ID.String(), Mode: pt.Mode, Warnings: pt.Warnings, SnapshotModeAchieved: pt.SnapshotModeAchieved,
			BytesLogical: pt.Logical(), BytesRead: pt.BytesRead, BytesStored: pt.BytesStored},
		Point: catalog.BackupPoint{Repository: repoID, ID: pt.ID.String(), Time: pt.Time, Connection: u.Connection,
			VMID: u.VMID, VMName: u.VMName, Mode: pt.Mode, Parent: pt.Parent, Disks: len(pt.Disks),
			BytesLogical: pt.Logical(), BytesStored: pt.BytesStored, Tags: pt.Tags, Protected: pt.Protected, JobID: u.Job,
			SnapshotMode: pt.SnapshotMode, SnapshotModeAchieved: pt.SnapshotModeAchieved, Hooks: pt.Hooks}}
}

// withCommit sets done's Commit: the unit's end, written in its job's
// completion transaction (queue.UnitDone.Commit), for a unit whose grant
// recorded its task's start (from a leader of before, the leader records
// both from the outcome).
func withCommit(done queue.UnitDone, u queue.VMUnit, repoID string, pt *repo.Point) queue.UnitDone {
	if !u.TaskStarted || u.Job == 0 || u.Task == 0 {
		return done
	}
	end := unitEnd(u, repoID, pt, time.Now())
	done.Commit = func(ctx context.Context, tx pgx.Tx) error { return postgres.EndWorkerUnitTx(ctx, tx, end) }
	return done
}
