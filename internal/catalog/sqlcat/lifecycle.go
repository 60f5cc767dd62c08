package sqlcat

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// The life of a running job beyond CreateJob and UpdateJob: its owner's
// heartbeats and progress, cancel requests from any process, ending the
// jobs of owners that are gone, pruning old history, and notices of
// changes for other processes.

// notify tells other processes' watchers (PostgreSQL) that a job changed.
func (c *Catalog) notify(ctx context.Context, tx Tx, id int64, what string) error {
	if c.d.Notify == nil {
		return nil
	}
	return c.d.Notify(ctx, tx, strconv.FormatInt(id, 10)+" "+what, catalog.LineNotice(what))
}

// Heartbeat records a running job's sign of life and progress and returns
// its cancel request.
func (c *Catalog) Heartbeat(ctx context.Context, id int64, p *catalog.Progress) (time.Time, error) {
	q := `UPDATE jobs SET heartbeat_at = ?`
	args := []any{c.timeArg(c.now())}
	if p != nil {
		q += `, bytes_done = ?, bytes_total = ?, bytes_per_second = ?, eta_seconds = ?, items_done = ?, items_total = ?`
		args = append(args, p.BytesDone, p.BytesTotal, p.BytesPerSecond, etaSeconds(p.ETA), p.ItemsDone, p.ItemsTotal)
	}
	q = c.d.Rebind(q + ` WHERE id = ? AND ` + unfinished + ` RETURNING cancel_requested_at`)
	args = append(args, id)
	var cancel time.Time
	err := c.b.Write(ctx, func(tx Tx) error {
		rows, err := tx.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		found := rows.Next()
		if found {
			err = rows.Scan(timeDest{&cancel})
		}
		rows.Close()
		if err = errors.Join(err, rows.Err()); err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: no running job %d", catalog.ErrNotFound, id)
		}
		if p == nil {
			return nil // a sign of life alone changes nothing a reader shows
		}
		return c.notify(ctx, tx, id, catalog.NoticeProgress)
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("catalog: heartbeat: %w", err)
	}
	return cancel, nil
}

// RequestCancel sets a queued or running job's cancel request and logs
// msg.
func (c *Catalog) RequestCancel(ctx context.Context, id int64, msg string) (catalog.Job, error) {
	now := c.now()
	q := c.d.Rebind(`UPDATE jobs SET cancel_requested_at = COALESCE(cancel_requested_at, ?)
		WHERE id = ? AND ` + unfinished + ` RETURNING ` + jobColumns)
	ins := c.d.Rebind(insertEvent)
	var j catalog.Job
	found := false
	err := c.b.Write(ctx, func(tx Tx) error {
		rows, err := tx.Query(ctx, q, c.timeArg(now), id)
		if err != nil {
			return err
		}
		found = rows.Next()
		if found {
			j, err = scanJob(rows)
		}
		rows.Close()
		if err = errors.Join(err, rows.Err()); err != nil || !found {
			return err
		}
		if msg != "" {
			line := []catalog.Event{{Time: now, JobID: id, Level: "warn", Kind: "cancel", Message: msg}}
			seqs, err := c.appendEvents(ctx, tx, ins, line)
			if err != nil {
				return err
			}
			j.LogLines = seqs[0]
		}
		return c.notify(ctx, tx, id, catalog.NoticeCancel)
	})
	if err != nil {
		return catalog.Job{}, fmt.Errorf("catalog: request cancel: %w", err)
	}
	if found {
		return j, nil
	}
	j, err = c.GetJob(ctx, id)
	if err != nil {
		return catalog.Job{}, fmt.Errorf("catalog: request cancel: %w", err)
	}
	return j, fmt.Errorf("%w: job %d is %s", catalog.ErrFinished, id, j.Status)
}

// AbandonJob ends an unfinished job whose heartbeat is still lastSeen.
func (c *Catalog) AbandonJob(ctx context.Context, id int64, lastSeen time.Time, status catalog.Status, msg string) (bool, error) {
	if !status.Done() {
		return false, fmt.Errorf("catalog: abandon job %d: %q is not a final status", id, status)
	}
	now := c.now()
	q := c.d.Rebind(`UPDATE jobs SET status = ?, error = ?, finished_at = ?
		WHERE id = ? AND ` + unfinished + ` AND heartbeat_at IS NOT DISTINCT FROM ?`)
	ins := c.d.Rebind(insertEvent)
	done := false
	err := c.b.Write(ctx, func(tx Tx) error {
		n, err := tx.Exec(ctx, q, string(status), msg, c.timeArg(now), id, c.timeArg(lastSeen))
		if err != nil || n == 0 {
			done = false
			return err
		}
		done = true
		line := []catalog.Event{{Time: now, JobID: id, Level: "error", Kind: "abandoned", Message: msg}}
		if _, err := c.appendEvents(ctx, tx, ins, line); err != nil {
			return err
		}
		return c.notify(ctx, tx, id, catalog.NoticeUpdated)
	})
	if err != nil {
		return false, fmt.Errorf("catalog: abandon job %d: %w", id, err)
	}
	return done, nil
}

// finishedBefore selects the jobs whose history is old enough to prune.
// A finished job's status is one of the Done ones; it is written as "not
// unfinished" so that it cannot be looked up through jobs_status: SQLite
// (which keeps no statistics) preferred that index to jobs_finished and
// read every finished job of the catalog, a million rows, in each step,
// holding the write lock for seconds.
const finishedBefore = `SELECT id FROM jobs WHERE finished_at < ? AND status NOT IN ('queued', 'running')`

// pruneSteps are PruneHistory's deletes, in order; each takes the cut-off
// time and the most rows it may delete.
var pruneSteps = []string{
	`DELETE FROM events WHERE id IN (SELECT id FROM events WHERE job_id IN (` + finishedBefore + `) LIMIT ?)`,
	`DELETE FROM tasks WHERE id IN (SELECT id FROM tasks WHERE job_id IN (` + finishedBefore + `) LIMIT ?)`,
	`DELETE FROM jobs WHERE id IN (SELECT id FROM jobs j WHERE finished_at < ? AND status NOT IN ('queued', 'running')
		AND NOT EXISTS (SELECT 1 FROM events WHERE events.job_id = j.id)
		AND NOT EXISTS (SELECT 1 FROM tasks WHERE tasks.job_id = j.id) LIMIT ?)`,
	`DELETE FROM events WHERE id IN (SELECT id FROM events WHERE job_id IS NULL AND task_id IS NULL AND occurred_at < ? LIMIT ?)`,
}

// PruneHistory deletes at most limit rows of old history in one
// transaction: events of old jobs first, then their VM tasks, then the
// jobs left without either, then old events of no job. Each step is a
// bounded DELETE through an index (events_log, tasks_job, jobs_finished,
// events_time), so a catalog of millions of rows is pruned in steps that
// never hold the write lock for long.
func (c *Catalog) PruneHistory(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("catalog: prune history: the batch limit must be positive, not %d", limit)
	}
	cut := c.timeArg(before)
	total := 0
	err := c.b.Write(ctx, func(tx Tx) error {
		total = 0
		for _, q := range pruneSteps {
			if total >= limit {
				break
			}
			n, err := tx.Exec(ctx, c.d.Rebind(q), cut, limit-total)
			if err != nil {
				return err
			}
			total += int(n)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("catalog: prune history: %w", err)
	}
	return total, nil
}

// WatchJobs turns the backend's notices into JobNotices.
func (c *Catalog) WatchJobs(ctx context.Context) (<-chan catalog.JobNotice, error) {
	return c.watch(ctx, false)
}

// WatchJobLines delivers the notices WatchJobs does not: of the lines
// appended to a job's log and of its progress (catalog.LineNotice), a
// resync first, once listening holds, and again whenever notices may
// have been lost. A process listens only while it has subscribers: a
// shared catalog's lines are most of its notices.
func (c *Catalog) WatchJobLines(ctx context.Context) (<-chan catalog.JobNotice, error) {
	return c.watch(ctx, true)
}

// watch turns the backend's notices (of lines, or the others) into
// JobNotices.
func (c *Catalog) watch(ctx context.Context, lines bool) (<-chan catalog.JobNotice, error) {
	l, ok := c.b.(Listener)
	if !ok || c.d.Notify == nil {
		return nil, fmt.Errorf("catalog: %s cannot push changes to other processes: %w", c.d.Name, errors.ErrUnsupported)
	}
	raw, err := l.Listen(ctx, lines)
	if err != nil {
		return nil, fmt.Errorf("catalog: watch jobs: %w", err)
	}
	out := make(chan catalog.JobNotice, 64)
	go func() {
		defer close(out)
		for p := range raw {
			n := catalog.JobNotice{What: catalog.NoticeResync}
			if id, what, ok := strings.Cut(p, " "); ok {
				if v, err := strconv.ParseInt(id, 10, 64); err == nil {
					n = catalog.JobNotice{JobID: v, What: what}
				}
			}
			select {
			case out <- n:
			case <-ctx.Done():
				for range raw { // let the listener finish
				}
				return
			}
		}
	}()
	return out, nil
}
