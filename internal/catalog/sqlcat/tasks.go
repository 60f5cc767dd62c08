package sqlcat

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/coffer-backup/coffer/internal/catalog"
)

const taskColumns = `id, job_id, connection, vm_id, vm_name, host, datastores, status, mode, snapshot_mode,
	attempts, started_at, finished_at, bytes_logical, bytes_read, bytes_stored, backup_point_id, warnings, error,
	snapshot_mode_achieved`

func (c *Catalog) taskArgs(t *catalog.Task) ([]any, error) {
	ds, err := jsonArg(t.Datastores, len(t.Datastores))
	if err != nil {
		return nil, err
	}
	warn, err := jsonArg(t.Warnings, len(t.Warnings))
	if err != nil {
		return nil, err
	}
	return []any{t.JobID, t.Connection, t.VMID, t.VMName, t.Host, ds, string(t.Status), t.Mode, t.SnapshotMode,
		t.Attempts, c.timeArg(t.StartedAt), c.timeArg(t.FinishedAt), t.BytesLogical, t.BytesRead, t.BytesStored,
		t.BackupPointID, warn, t.Error, t.SnapshotModeAchieved}, nil
}

func scanTask(r Rows) (catalog.Task, error) {
	var t catalog.Task
	var status string
	err := r.Scan(&t.ID, &t.JobID, &t.Connection, &t.VMID, &t.VMName, &t.Host, jsonDest{&t.Datastores}, &status,
		&t.Mode, &t.SnapshotMode, &t.Attempts, timeDest{&t.StartedAt}, timeDest{&t.FinishedAt}, &t.BytesLogical,
		&t.BytesRead, &t.BytesStored, &t.BackupPointID, jsonDest{&t.Warnings}, &t.Error, &t.SnapshotModeAchieved)
	t.Status = catalog.Status(status)
	return t, err
}

// CreateTasks inserts tasks in one transaction and sets their IDs.
func (c *Catalog) CreateTasks(ctx context.Context, tasks []*catalog.Task) error {
	if len(tasks) == 0 {
		return nil
	}
	rows := make([][]any, len(tasks))
	for i, t := range tasks {
		args, err := c.taskArgs(t)
		if err != nil {
			return fmt.Errorf("catalog: create tasks: %w", err)
		}
		rows[i] = args
	}
	q := c.d.Rebind(`INSERT INTO tasks (job_id, connection, vm_id, vm_name, host, datastores, status, mode,
		snapshot_mode, attempts, started_at, finished_at, bytes_logical, bytes_read, bytes_stored, backup_point_id,
		warnings, error, snapshot_mode_achieved) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`)
	var ids []int64
	err := c.b.Write(ctx, func(tx Tx) error {
		var err error
		ids, err = tx.InsertBatch(ctx, q, rows)
		return c.missingRef(err, "task")
	})
	if err != nil {
		return fmt.Errorf("catalog: create tasks: %w", err)
	}
	for i, t := range tasks {
		t.ID = ids[i]
	}
	return nil
}

// UpdateTasks rewrites existing tasks in one transaction; if any is
// missing nothing is changed.
func (c *Catalog) UpdateTasks(ctx context.Context, tasks []*catalog.Task) error {
	if len(tasks) == 0 {
		return nil
	}
	// Rows are updated in ID order so that two writers updating
	// overlapping sets lock them in the same order and cannot deadlock.
	sorted := slices.Clone(tasks)
	slices.SortFunc(sorted, func(a, b *catalog.Task) int { return cmp.Compare(a.ID, b.ID) })
	rows := make([][]any, len(sorted))
	for i, t := range sorted {
		args, err := c.taskArgs(t)
		if err != nil {
			return fmt.Errorf("catalog: update tasks: %w", err)
		}
		rows[i] = append(args, t.ID)
	}
	q := c.d.Rebind(`UPDATE tasks SET job_id = ?, connection = ?, vm_id = ?, vm_name = ?, host = ?, datastores = ?,
		status = ?, mode = ?, snapshot_mode = ?, attempts = ?, started_at = ?, finished_at = ?, bytes_logical = ?,
		bytes_read = ?, bytes_stored = ?, backup_point_id = ?, warnings = ?, error = ?, snapshot_mode_achieved = ?
		WHERE id = ?`)
	err := c.b.Write(ctx, func(tx Tx) error {
		n, err := tx.ExecBatch(ctx, q, rows)
		if err != nil {
			return c.missingRef(err, "task")
		}
		for i, k := range n {
			if k == 0 {
				return fmt.Errorf("%w: task %d", catalog.ErrNotFound, sorted[i].ID)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("catalog: update tasks: %w", err)
	}
	return nil
}

// GetTask reads one task.
func (c *Catalog) GetTask(ctx context.Context, id int64) (catalog.Task, error) {
	tasks, err := c.listTasks(ctx, &where{conds: []string{"id = ?"}, args: []any{id}}, 1)
	if err != nil {
		return catalog.Task{}, err
	}
	if len(tasks) == 0 {
		return catalog.Task{}, fmt.Errorf("%w: task %d", catalog.ErrNotFound, id)
	}
	return tasks[0], nil
}

// ListTasks lists tasks in creation order.
func (c *Catalog) ListTasks(ctx context.Context, f catalog.TaskFilter) ([]catalog.Task, error) {
	w := &where{}
	if f.JobID != 0 {
		w.add("job_id = ?", f.JobID)
	}
	if f.VMID != "" {
		w.add("vm_id = ?", f.VMID)
	}
	if f.Status != "" {
		w.add("status = ?", string(f.Status))
	}
	if f.AfterID != 0 {
		w.add("id > ?", f.AfterID)
	}
	return c.listTasks(ctx, w, f.Limit)
}

func (c *Catalog) listTasks(ctx context.Context, w *where, limit int) ([]catalog.Task, error) {
	q, args := w.finish("SELECT "+taskColumns+" FROM tasks", "id", limit)
	var out []catalog.Task
	err := c.query(ctx, q, args, func(r Rows) error {
		t, err := scanTask(r)
		out = append(out, t)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: list tasks: %w", err)
	}
	return out, nil
}

// SupersedeTask implements catalog.Catalog: the update comes first, so
// that it takes the row lock a worker's end of the unit also takes;
// the read after it sees that end if it committed first.
func (c *Catalog) SupersedeTask(ctx context.Context, job int64, connection, vmID, msg string) (string, error) {
	end := c.d.Rebind(`UPDATE tasks SET status = ?, error = ?, finished_at = ?
		WHERE job_id = ? AND connection = ? AND vm_id = ? AND status IN (?, ?)`)
	read := c.d.Rebind(`SELECT backup_point_id FROM tasks
		WHERE job_id = ? AND connection = ? AND vm_id = ? AND status = ? AND backup_point_id <> '' ORDER BY id LIMIT 1`)
	var point string
	err := c.b.Write(ctx, func(tx Tx) error {
		point = ""
		if _, err := tx.Exec(ctx, end, string(catalog.StatusCancelled), msg, c.timeArg(c.now()), job, connection, vmID,
			string(catalog.StatusQueued), string(catalog.StatusRunning)); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, read, job, connection, vmID, string(catalog.StatusSuccess))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := rows.Scan(&point); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	if err != nil {
		return "", fmt.Errorf("catalog: supersede job %d's task of %s/%s: %w", job, connection, vmID, err)
	}
	return point, nil
}
