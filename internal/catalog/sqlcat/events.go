package sqlcat

import (
	"cmp"
	"context"
	"fmt"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat/sqlq"
	"slices"
	"strings"

	"github.com/coffer-backup/coffer/internal/catalog"
)

var eventColumns = []string{"occurred_at", "job_id", "task_id", "level", "kind", "message", "fields", "seq"}

const insertEvent = `INSERT INTO events (occurred_at, job_id, task_id, level, kind, message, fields, seq)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?)`

const selectEvents = `SELECT id, occurred_at, job_id, task_id, level, kind, message, fields, seq FROM events`

func scanEvent(r Rows) (catalog.Event, error) {
	var e catalog.Event
	err := r.Scan(&e.ID, timeDest{&e.Time}, idDest{&e.JobID}, idDest{&e.TaskID}, &e.Level, &e.Kind, &e.Message,
		jsonDest{&e.Fields}, idDest{&e.Seq})
	return e, err
}

// AddEvents inserts events in one transaction; a zero Time becomes now,
// and each event of a job gets the next line number of the job's log.
func (c *Catalog) AddEvents(ctx context.Context, events []catalog.Event) error {
	if len(events) == 0 {
		return nil
	}
	now := c.now()
	for i := range events {
		if events[i].Time.IsZero() {
			events[i].Time = now
		}
	}
	q := c.d.Rebind(insertEvent)
	var seqs []int64
	err := c.b.Write(ctx, func(tx Tx) error {
		var err error
		seqs, err = c.appendEvents(ctx, tx, q, events)
		return err
	})
	if err != nil {
		return fmt.Errorf("catalog: add events: %w", err)
	}
	for i := range events {
		events[i].Seq = seqs[i]
	}
	return nil
}

// appendEvents numbers events within their jobs' logs and inserts them in
// tx; it returns each event's line number. Bumping jobs.log_lines takes
// the job's row lock until commit, so concurrent writers of one log
// (another process cancelling the job) number their lines in commit
// order, without gaps; jobs are locked in ID order so that writers of
// several logs cannot deadlock. A missing job matches no row: not found.
func (c *Catalog) appendEvents(ctx context.Context, tx Tx, insert string, events []catalog.Event) ([]int64, error) {
	perJob := map[int64]int64{}
	for _, e := range events {
		if e.JobID != 0 {
			perJob[e.JobID]++
		}
	}
	jobs := make([]int64, 0, len(perJob))
	for id := range perJob {
		jobs = append(jobs, id)
	}
	slices.SortFunc(jobs, cmp.Compare)
	bump := c.d.Rebind(`UPDATE jobs SET log_lines = log_lines + ? WHERE id = ? RETURNING log_lines`)
	next := map[int64]int64{}
	for _, id := range jobs {
		last, err := sqlq.Int(ctx, tx, bump, perJob[id], id)
		if err != nil {
			return nil, err
		}
		if last < 0 {
			return nil, fmt.Errorf("%w: an event refers to job %d, which does not exist", catalog.ErrNotFound, id)
		}
		next[id] = last - perJob[id] + 1
	}
	seqs := make([]int64, len(events))
	rows := make([][]any, len(events))
	for i, e := range events {
		fields, err := jsonArg(e.Fields, len(e.Fields))
		if err != nil {
			return nil, fmt.Errorf("fields of %q: %w", e.Kind, err)
		}
		var seq any
		if e.JobID != 0 {
			seqs[i] = next[e.JobID]
			next[e.JobID]++
			seq = seqs[i]
		}
		rows[i] = []any{c.timeArg(e.Time), idArg(e.JobID), idArg(e.TaskID), e.Level, e.Kind, e.Message, fields, seq}
	}
	if err := tx.BulkInsert(ctx, "events", eventColumns, insert, rows); err != nil {
		return nil, c.missingRef(err, "event")
	}
	for _, id := range jobs {
		if err := c.notify(ctx, tx, id, catalog.NoticeLog); err != nil {
			return nil, err
		}
	}
	return seqs, nil
}

// ListEvents lists events newest first.
func (c *Catalog) ListEvents(ctx context.Context, f catalog.EventFilter) ([]catalog.Event, error) {
	w := &where{}
	if f.JobID != 0 {
		w.add("job_id = ?", f.JobID)
	}
	if f.TaskID != 0 {
		w.add("task_id = ?", f.TaskID)
	}
	if len(f.Kinds) > 0 {
		args := make([]any, len(f.Kinds))
		for i, k := range f.Kinds {
			args[i] = k
		}
		w.add("kind IN ("+strings.TrimSuffix(strings.Repeat("?, ", len(args)), ", ")+")", args...)
	}
	if !f.Since.IsZero() {
		w.add("occurred_at >= ?", c.timeArg(f.Since))
	}
	q, args := w.finish(selectEvents, "occurred_at DESC, id DESC", f.Limit)
	return c.listEvents(ctx, q, args)
}

// JobLog pages through a job's log in order; events_log (job_id, seq)
// makes every page one index range, however deep into the log.
func (c *Catalog) JobLog(ctx context.Context, jobID, after int64, limit int) ([]catalog.Event, error) {
	w := &where{}
	w.add("job_id = ?", jobID)
	w.add("seq > ?", after)
	q, args := w.finish(selectEvents, "seq", limit)
	return c.listEvents(ctx, q, args)
}

func (c *Catalog) listEvents(ctx context.Context, q string, args []any) ([]catalog.Event, error) {
	var out []catalog.Event
	err := c.query(ctx, q, args, func(r Rows) error {
		e, err := scanEvent(r)
		out = append(out, e)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: list events: %w", err)
	}
	return out, nil
}
