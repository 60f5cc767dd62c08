package sqlcat

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// jobColumns are read by scanJob, in this order.
const jobColumns = `id, kind, policy, repository, status, worker, created_at, started_at, finished_at,
	tasks_total, tasks_ok, tasks_fail, error, object, vm, user_name, token, bytes_done, bytes_total,
	bytes_per_second, eta_seconds, items_done, items_total, owner_host, owner_pid, owner_start, heartbeat_at,
	cancel_requested_at, log_lines`

// jobWritten are the columns CreateJob and UpdateJob write, in the order
// of jobArgs: all but id, cancel_requested_at and log_lines.
var jobWritten = []string{"kind", "policy", "repository", "status", "worker", "created_at", "started_at",
	"finished_at", "tasks_total", "tasks_ok", "tasks_fail", "error", "object", "vm", "user_name", "token",
	"bytes_done", "bytes_total", "bytes_per_second", "eta_seconds", "items_done", "items_total", "owner_host",
	"owner_pid", "owner_start", "heartbeat_at"}

func (c *Catalog) jobArgs(j *catalog.Job) []any {
	p := j.Progress
	return []any{j.Kind, j.Policy, j.Repository, string(j.Status), j.Worker, c.timeArg(j.CreatedAt),
		c.timeArg(j.StartedAt), c.timeArg(j.FinishedAt), j.TasksTotal, j.TasksOK, j.TasksFail, j.Error,
		j.Object, j.VM, j.User, j.Token, p.BytesDone, p.BytesTotal, p.BytesPerSecond, etaSeconds(p.ETA),
		p.ItemsDone, p.ItemsTotal, j.Owner.Host, j.Owner.PID, int64(j.Owner.Start), c.timeArg(j.Heartbeat)}
}

// etaSeconds stores an ETA to the second.
func etaSeconds(d time.Duration) int64 { return int64(d / time.Second) }

func scanJob(r Rows) (catalog.Job, error) {
	var j catalog.Job
	var status string
	var eta, start int64
	p := &j.Progress
	err := r.Scan(&j.ID, &j.Kind, &j.Policy, &j.Repository, &status, &j.Worker, timeDest{&j.CreatedAt},
		timeDest{&j.StartedAt}, timeDest{&j.FinishedAt}, &j.TasksTotal, &j.TasksOK, &j.TasksFail, &j.Error,
		&j.Object, &j.VM, &j.User, &j.Token, &p.BytesDone, &p.BytesTotal, &p.BytesPerSecond, &eta,
		&p.ItemsDone, &p.ItemsTotal, &j.Owner.Host, &j.Owner.PID, &start, timeDest{&j.Heartbeat},
		timeDest{&j.CancelRequested}, &j.LogLines)
	j.Status = catalog.Status(status)
	p.ETA = time.Duration(eta) * time.Second
	j.Owner.Start = uint64(start)
	return j, err
}

// CreateJob inserts a job and sets its ID (and CreatedAt when zero).
func (c *Catalog) CreateJob(ctx context.Context, j *catalog.Job) error {
	if j.CreatedAt.IsZero() {
		j.CreatedAt = normTime(c.now())
	}
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(jobWritten)), ", ")
	q := c.d.Rebind(`INSERT INTO jobs (` + strings.Join(jobWritten, ", ") + `) VALUES (` + marks + `) RETURNING id`)
	var id int64
	err := c.b.Write(ctx, func(tx Tx) error {
		ids, err := tx.InsertBatch(ctx, q, [][]any{c.jobArgs(j)})
		if err != nil {
			return err
		}
		id = ids[0]
		return c.notify(ctx, tx, id, catalog.NoticeCreated)
	})
	if err != nil {
		return fmt.Errorf("catalog: create job: %w", err)
	}
	j.ID = id
	j.LogLines, j.CancelRequested = 0, time.Time{}
	return nil
}

// UpdateJob rewrites every field of an existing job but its cancel
// request and its log's length, which other processes change.
func (c *Catalog) UpdateJob(ctx context.Context, j *catalog.Job) error {
	q := c.d.Rebind(`UPDATE jobs SET ` + strings.Join(jobWritten, " = ?, ") + ` = ? WHERE id = ?`)
	err := c.b.Write(ctx, func(tx Tx) error {
		n, err := tx.Exec(ctx, q, append(c.jobArgs(j), j.ID)...)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: job %d", catalog.ErrNotFound, j.ID)
		}
		return c.notify(ctx, tx, j.ID, catalog.NoticeUpdated)
	})
	if err != nil {
		return fmt.Errorf("catalog: update job: %w", err)
	}
	return nil
}

// GetJob reads one job.
func (c *Catalog) GetJob(ctx context.Context, id int64) (catalog.Job, error) {
	jobs, err := c.listJobs(ctx, &where{conds: []string{"id = ?"}, args: []any{id}}, 1)
	if err != nil {
		return catalog.Job{}, err
	}
	if len(jobs) == 0 {
		return catalog.Job{}, fmt.Errorf("%w: job %d", catalog.ErrNotFound, id)
	}
	return jobs[0], nil
}

// jobsAfter selects the jobs listed after a cursor (created_at, ID).
const jobsAfter = "created_at <= ? AND (created_at < ? OR id < ?)"

// unfinished is the condition of a queued or running job.
const unfinished = `status IN ('queued', 'running')`

// ListJobs lists jobs newest first.
func (c *Catalog) ListJobs(ctx context.Context, f catalog.JobFilter) ([]catalog.Job, error) {
	w := &where{}
	for _, eq := range []struct{ col, v string }{{"kind", f.Kind}, {"policy", f.Policy}, {"status", string(f.Status)},
		{"user_name", f.User}, {"object", f.Object}} {
		if eq.v != "" {
			w.add(eq.col+" = ?", eq.v)
		}
	}
	if f.Unfinished {
		w.add(unfinished)
	}
	if f.VM != "" {
		// A VM among a policy run's tasks: jobs_vm, tasks_vm_name and
		// tasks_vm find the few jobs without scanning their tasks. One
		// set of IDs rather than three ORed conditions: PostgreSQL read
		// the jobs newest first testing each against the ORs, half a
		// million rows for a VM backed up every day (0.7 s).
		w.add(`id IN (SELECT id FROM jobs WHERE vm = ? UNION SELECT job_id FROM tasks WHERE vm_name = ?
			UNION SELECT job_id FROM tasks WHERE vm_id = ?)`, f.VM, f.VM, f.VM)
	}
	if !f.Since.IsZero() {
		w.add("created_at >= ?", c.timeArg(f.Since))
	}
	if !f.Until.IsZero() {
		w.add("created_at < ?", c.timeArg(f.Until))
	}
	if len(f.IDs) > 0 {
		args := make([]any, len(f.IDs))
		for i, id := range f.IDs {
			args[i] = id
		}
		w.add("id IN ("+strings.TrimSuffix(strings.Repeat("?, ", len(args)), ", ")+")", args...)
	}
	if f.AboveID > 0 {
		w.add("id > ?", f.AboveID)
	}
	if f.After.ID != 0 {
		// The bound on created_at alone lets the database start in
		// jobs_created at the cursor; with the OR alone SQLite read the
		// index from the newest job down to it (half a million entries
		// half-way through a million jobs).
		at := c.timeArg(f.After.CreatedAt)
		w.add(jobsAfter, at, at, f.After.ID)
	}
	return c.listJobs(ctx, w, f.Limit)
}

func (c *Catalog) listJobs(ctx context.Context, w *where, limit int) ([]catalog.Job, error) {
	q, args := w.finish("SELECT "+jobColumns+" FROM jobs", "created_at DESC, id DESC", limit)
	var out []catalog.Job
	err := c.query(ctx, q, args, func(r Rows) error {
		j, err := scanJob(r)
		out = append(out, j)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: list jobs: %w", err)
	}
	return out, nil
}
