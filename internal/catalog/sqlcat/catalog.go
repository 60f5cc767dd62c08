package sqlcat

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// Catalog is catalog.Catalog over a Backend.
type Catalog struct {
	b   Backend
	d   Dialect
	now func() time.Time
}

var _ catalog.Catalog = (*Catalog)(nil)

// New wraps a backend whose schema is migrated.
func New(b Backend) *Catalog {
	return &Catalog{b: b, d: b.Dialect(), now: time.Now}
}

// Backend returns the driver underneath (for driver-specific tests).
func (c *Catalog) Backend() Backend { return c.b }

// Close closes the backend.
func (c *Catalog) Close() error { return c.b.Close() }

// query runs a read and calls scan for every row.
func (c *Catalog) query(ctx context.Context, q string, args []any, scan func(Rows) error) error {
	rows, err := c.b.Query(ctx, c.d.Rebind(q), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// missingRef turns a foreign-key violation into catalog.ErrNotFound.
func (c *Catalog) missingRef(err error, what string) error {
	if err != nil && c.d.IsForeignKeyViolation != nil && c.d.IsForeignKeyViolation(err) {
		return fmt.Errorf("%w: %s refers to a job or task that does not exist", catalog.ErrNotFound, what)
	}
	return err
}

// where collects the conditions of a filter.
type where struct {
	conds []string
	args  []any
}

func (w *where) add(cond string, arg any) {
	w.conds = append(w.conds, cond)
	w.args = append(w.args, arg)
}

// finish appends the conditions, the ordering and the limit to q.
func (w *where) finish(q, order string, limit int) (string, []any) {
	if len(w.conds) > 0 {
		q += " WHERE " + strings.Join(w.conds, " AND ")
	}
	q += " ORDER BY " + order
	if limit > 0 {
		q += " LIMIT ?"
		w.args = append(w.args, limit)
	}
	return q, w.args
}

const jobColumns = `id, kind, policy, repository, status, worker, created_at, started_at, finished_at,
	tasks_total, tasks_ok, tasks_fail, error`

func (c *Catalog) jobArgs(j *catalog.Job) []any {
	return []any{j.Kind, j.Policy, j.Repository, string(j.Status), j.Worker, c.timeArg(j.CreatedAt),
		c.timeArg(j.StartedAt), c.timeArg(j.FinishedAt), j.TasksTotal, j.TasksOK, j.TasksFail, j.Error}
}

func scanJob(r Rows) (catalog.Job, error) {
	var j catalog.Job
	var status string
	err := r.Scan(&j.ID, &j.Kind, &j.Policy, &j.Repository, &status, &j.Worker, timeDest{&j.CreatedAt},
		timeDest{&j.StartedAt}, timeDest{&j.FinishedAt}, &j.TasksTotal, &j.TasksOK, &j.TasksFail, &j.Error)
	j.Status = catalog.Status(status)
	return j, err
}

// CreateJob inserts a job and sets its ID (and CreatedAt when zero).
func (c *Catalog) CreateJob(ctx context.Context, j *catalog.Job) error {
	if j.CreatedAt.IsZero() {
		j.CreatedAt = normTime(c.now())
	}
	q := c.d.Rebind(`INSERT INTO jobs (kind, policy, repository, status, worker, created_at, started_at, finished_at,
		tasks_total, tasks_ok, tasks_fail, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`)
	var id int64
	err := c.b.Write(ctx, func(tx Tx) error {
		ids, err := tx.InsertBatch(ctx, q, [][]any{c.jobArgs(j)})
		if err == nil {
			id = ids[0]
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("catalog: create job: %w", err)
	}
	j.ID = id
	return nil
}

// UpdateJob rewrites every field of an existing job.
func (c *Catalog) UpdateJob(ctx context.Context, j *catalog.Job) error {
	q := c.d.Rebind(`UPDATE jobs SET kind = ?, policy = ?, repository = ?, status = ?, worker = ?, created_at = ?,
		started_at = ?, finished_at = ?, tasks_total = ?, tasks_ok = ?, tasks_fail = ?, error = ? WHERE id = ?`)
	err := c.b.Write(ctx, func(tx Tx) error {
		n, err := tx.Exec(ctx, q, append(c.jobArgs(j), j.ID)...)
		if err == nil && n == 0 {
			return fmt.Errorf("%w: job %d", catalog.ErrNotFound, j.ID)
		}
		return err
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

// ListJobs lists jobs newest first.
func (c *Catalog) ListJobs(ctx context.Context, f catalog.JobFilter) ([]catalog.Job, error) {
	w := &where{}
	if f.Policy != "" {
		w.add("policy = ?", f.Policy)
	}
	if f.Status != "" {
		w.add("status = ?", string(f.Status))
	}
	if !f.Since.IsZero() {
		w.add("created_at >= ?", c.timeArg(f.Since))
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
