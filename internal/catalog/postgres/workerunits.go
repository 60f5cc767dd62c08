package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// The catalog's part of a VM unit handed to a worker, written inside a
// transaction the caller owns (docs/design/fleet.md, "A VM unit's rows
// commit with its job"): the grant's, where the leader also inserts
// River's job, and the worker's completion, where it also completes that
// job. Only PostgreSQL has them: on SQLite one process runs every attempt
// and its engine records it.

// StartTaskTx records in tx that attempt of task starts: running, its
// attempt count, its first start kept. A task that ended, or that a later
// attempt runs, is refused (catalog.ErrNotFound): its grant must not be
// handed off.
func StartTaskTx(ctx context.Context, tx pgx.Tx, jobID, taskID int64, attempt int, started time.Time) error {
	tag, err := tx.Exec(ctx, `UPDATE tasks SET status = $1, attempts = $2, started_at = COALESCE(started_at, $3), error = ''
		WHERE id = $4 AND job_id = $5 AND attempts <= $2 AND finished_at IS NULL`,
		string(catalog.StatusRunning), attempt, timeArg(started), taskID, jobID)
	if err != nil {
		return fmt.Errorf("catalog: start task %d: %w", taskID, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("%w: task %d of job %d, unfinished and not past attempt %d", catalog.ErrNotFound, taskID, jobID, attempt)
	}
	return nil
}

// UnitEnd is what a worker's unit that succeeded commits with its
// completion: the task's end and its point.
type UnitEnd struct {
	// Worker and Epoch are the registration the unit ran under: the write
	// is refused unless it is still the registry's (as AddWorkerEvents).
	Worker string
	Epoch  int64
	// Task is the task's end: its ID, job and attempt (which must be the
	// one running), and what the point says.
	Task  catalog.Task
	Point catalog.BackupPoint
}

// EndWorkerUnitTx records in tx the end of a unit that succeeded on a
// worker: the registry's check of the worker's epoch (the no-op update
// that also locks its row against DeclareWorkersLost until commit), the
// task's end, only while that attempt still runs, and the new point (an
// insert: a worker may not read or change the points recorded). A
// registration that no longer holds, or a task another attempt or the
// leader moved on, is an error wrapping catalog.ErrFenced, and the caller
// rolls tx back: the point is in the repository, never current in the
// catalog.
func EndWorkerUnitTx(ctx context.Context, tx pgx.Tx, e UnitEnd) error {
	tag, err := tx.Exec(ctx, `UPDATE workers SET epoch = epoch WHERE name = $1 AND epoch = $2 AND state <> $3`,
		e.Worker, e.Epoch, string(catalog.WorkerLost))
	if err != nil {
		return fmt.Errorf("catalog: check worker %s's registration: %w", e.Worker, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("%w: worker %s is no longer registered at epoch %d", catalog.ErrFenced, e.Worker, e.Epoch)
	}
	t, p := e.Task, e.Point
	tag, err = tx.Exec(ctx, `UPDATE tasks SET status = $1, finished_at = $2, error = '', backup_point_id = $3, mode = $4,
		warnings = $5, snapshot_mode_achieved = $6, bytes_logical = $7, bytes_read = $8, bytes_stored = $9
		WHERE id = $10 AND job_id = $11 AND attempts = $12 AND status = $13`,
		string(catalog.StatusSuccess), timeArg(t.FinishedAt), t.BackupPointID, t.Mode, jsonArg(t.Warnings, len(t.Warnings)),
		t.SnapshotModeAchieved, t.BytesLogical, t.BytesRead, t.BytesStored, t.ID, t.JobID, t.Attempts, string(catalog.StatusRunning))
	if err != nil {
		return fmt.Errorf("catalog: end task %d: %w", t.ID, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("%w: task %d of job %d no longer runs attempt %d", catalog.ErrFenced, t.ID, t.JobID, t.Attempts)
	}
	if p.Repository == "" || p.ID == "" {
		return fmt.Errorf("catalog: a point without a repository or ID: %+v", p)
	}
	// The lock the catalog's writers of a repository's points share
	// (sqlcat's pointsLock).
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0))`, "coffer.catalog.points/"+p.Repository); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO backup_points (repository, id, taken_at, connection, vm_id, vm_name, mode, parent, disks,
		bytes_logical, bytes_stored, tags, protected, job_id, snapshot_mode, snapshot_mode_achieved, hooks)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`,
		p.Repository, p.ID, timeArg(p.Time), p.Connection, p.VMID, p.VMName, p.Mode, p.Parent, p.Disks, p.BytesLogical,
		p.BytesStored, jsonArg(p.Tags, len(p.Tags)), p.Protected, p.JobID, p.SnapshotMode, p.SnapshotModeAchieved, p.Hooks)
	if err != nil {
		return fmt.Errorf("catalog: record point %s: %w", p.ID, err)
	}
	return nil
}

// timeArg and jsonArg bind as sqlcat does: a zero time and an empty slice
// or map as NULL, a time in UTC to the microsecond, JSON as its text.
func timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Truncate(time.Microsecond)
}

func jsonArg[T any](v T, n int) any {
	if n == 0 {
		return nil
	}
	b, _ := json.Marshal(v) // strings and maps of strings always marshal
	return string(b)
}
