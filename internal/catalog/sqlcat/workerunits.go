package sqlcat

import (
	"context"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// The catalog's part of a VM unit handed to a worker, written inside a
// transaction the caller owns (docs/design/fleet.md, "The hand-off"): the
// grant's, where the leader also inserts River's job, and the worker's
// completion, where it also completes that job. Only PostgreSQL's driver
// exposes them (postgres.StartTaskTx, postgres.EndWorkerUnitTx): on
// SQLite one process runs every attempt and records it through its
// engine.

// StartTaskTx records in tx that attempt of task starts: running, its
// attempt count, and its first start kept. A task that ended, or that a
// later attempt runs, is refused (catalog.ErrNotFound): its grant must not
// be handed off.
func StartTaskTx(ctx context.Context, d Dialect, tx Tx, jobID, taskID int64, attempt int, started time.Time) error {
	c := &Catalog{d: d}
	n, err := tx.Exec(ctx, d.Rebind(`UPDATE tasks SET status = ?, attempts = ?, started_at = COALESCE(started_at, ?), error = ''
		WHERE id = ? AND job_id = ? AND attempts <= ? AND finished_at IS NULL`),
		string(catalog.StatusRunning), attempt, c.timeArg(started), taskID, jobID, attempt)
	if err != nil {
		return fmt.Errorf("catalog: start task %d: %w", taskID, err)
	}
	if n != 1 {
		return fmt.Errorf("%w: task %d of job %d, unfinished and not past attempt %d", catalog.ErrNotFound, taskID, jobID, attempt)
	}
	return nil
}

// UnitEnd is what a worker's unit that succeeded commits with its
// completion: the task's end and its point.
type UnitEnd struct {
	// Worker and Epoch are the registration the unit ran under: the
	// write is refused unless it is still the registry's (as
	// AddWorkerEvents).
	Worker string
	Epoch  int64
	// Task is the task's end: its ID, job and attempt (which must be the
	// one running), and what the point says (status, finished_at,
	// backup_point_id, mode, warnings, bytes, snapshot_mode_achieved).
	Task  catalog.Task
	Point catalog.BackupPoint
}

// EndWorkerUnitTx records in tx the end of a unit that succeeded on a
// worker: the registry's check of the worker's epoch (the no-op update
// that also locks its row against DeclareWorkersLost until commit), the
// task's end, only while that attempt still runs, and the point. A
// registration that no longer holds, or a task another attempt or the
// leader moved on, is an error wrapping catalog.ErrFenced, and the caller
// rolls tx back: the point is in the repository, never current in the
// catalog.
func EndWorkerUnitTx(ctx context.Context, d Dialect, tx Tx, e UnitEnd) error {
	c := &Catalog{d: d}
	n, err := tx.Exec(ctx, d.Rebind(`UPDATE workers SET epoch = epoch WHERE name = ? AND epoch = ? AND state <> ?`),
		e.Worker, e.Epoch, string(catalog.WorkerLost))
	if err != nil {
		return fmt.Errorf("catalog: check worker %s's registration: %w", e.Worker, err)
	}
	if n != 1 {
		return fmt.Errorf("%w: worker %s is no longer registered at epoch %d", catalog.ErrFenced, e.Worker, e.Epoch)
	}
	t := e.Task
	warn, err := jsonArg(t.Warnings, len(t.Warnings))
	if err != nil {
		return err
	}
	n, err = tx.Exec(ctx, d.Rebind(`UPDATE tasks SET status = ?, finished_at = ?, error = '', backup_point_id = ?, mode = ?,
		warnings = ?, snapshot_mode_achieved = ?, bytes_logical = ?, bytes_read = ?, bytes_stored = ?
		WHERE id = ? AND job_id = ? AND attempts = ? AND status = ?`),
		string(catalog.StatusSuccess), c.timeArg(t.FinishedAt), t.BackupPointID, t.Mode, warn, t.SnapshotModeAchieved,
		t.BytesLogical, t.BytesRead, t.BytesStored, t.ID, t.JobID, t.Attempts, string(catalog.StatusRunning))
	if err != nil {
		return fmt.Errorf("catalog: end task %d: %w", t.ID, err)
	}
	if n != 1 {
		return fmt.Errorf("%w: task %d of job %d no longer runs attempt %d", catalog.ErrFenced, t.ID, t.JobID, t.Attempts)
	}
	rows, repos, err := c.pointRows([]catalog.BackupPoint{e.Point})
	if err != nil {
		return err
	}
	if err := d.lock(ctx, tx, pointsLock(repos[0]), false); err != nil {
		return err
	}
	// A new point's ID is new: a plain insert, which needs no right to
	// read or change the points already recorded.
	if _, err := tx.Exec(ctx, d.Rebind(insertPoint), rows[0]...); err != nil {
		return fmt.Errorf("catalog: record point %s: %w", e.Point.ID, err)
	}
	return nil
}

// insertPoint writes one new point.
const insertPoint = `INSERT INTO backup_points (` + pointColumns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
