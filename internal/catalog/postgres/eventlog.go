package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat"
)

// A job's log lines are appended many times a second in a large fleet (a
// VM's unit records a few batches, from its worker and from the leader),
// and sqlcat appends each batch in a transaction of five round trips:
// begin, the job's line count bumped (its row lock numbers concurrent
// writers' lines in commit order), the COPY, the
// notice, commit; a worker's batch checks its registration first
// (sqlcat's asWorker). Here a batch of one job's lines is all that in one
// statement run as its own transaction: one round trip, with the
// transaction's effects, locks and lock order (the worker's row, then the
// job's). Batches of several jobs go to sqlcat.

// pgCatalog is sqlcat's catalog with one job's log lines appended in one
// statement.
type pgCatalog struct {
	*sqlcat.Catalog
	b *backend
}

func newCatalog(b *backend) catalog.Catalog { return pgCatalog{sqlcat.New(b), b} }

// appendLogFenced is appendLog behind the worker's registration, checked
// in the same statement: no line is written unless it holds.
var appendLogFenced = `WITH fence AS (
	UPDATE workers SET epoch = epoch WHERE name = $10 AND epoch = $11 AND state <> $12 RETURNING name),
bump AS (
	UPDATE jobs SET log_lines = log_lines + $1 WHERE id = $2 AND EXISTS (SELECT FROM fence) RETURNING id, log_lines - $1 AS base),
` + appendLines + `
SELECT (SELECT count(*) FROM fence), bump.base, (SELECT count(*) FROM (SELECT ` + noticeExpr + ` FROM bump) AS noted)
	FROM (VALUES (1)) AS one (x) LEFT JOIN bump ON true`

var appendLog = `WITH bump AS (
	UPDATE jobs SET log_lines = log_lines + $1 WHERE id = $2 RETURNING id, log_lines - $1 AS base),
` + appendLines + `
SELECT 1, bump.base, (SELECT count(*) FROM (SELECT ` + noticeExpr + ` FROM bump) AS noted)
	FROM (VALUES (1)) AS one (x) LEFT JOIN bump ON true`

// appendLines inserts the lines after bump's base, in their order.
const appendLines = `lines AS (
	INSERT INTO events (occurred_at, job_id, task_id, level, kind, message, fields, seq)
	SELECT l.occurred_at, bump.id, l.task_id, l.level, l.kind, l.message, l.fields::jsonb, bump.base + l.n
	FROM bump, unnest($3::timestamptz[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[])
		WITH ORDINALITY AS l (occurred_at, task_id, level, kind, message, fields, n))`

// noticeExpr is the job's log notice (notify's), its payload $9.
var noticeExpr = notifyExpr(lineChannel, "$9")

// AddEvents implements catalog.Catalog.
func (c pgCatalog) AddEvents(ctx context.Context, events []catalog.Event) error {
	if !oneJob(events) {
		return c.Catalog.AddEvents(ctx, events)
	}
	if err := c.appendLog(ctx, appendLog, nil, events); err != nil {
		return fmt.Errorf("catalog: add events: %w", err)
	}
	return nil
}

// AddWorkerEvents implements catalog.Catalog.
func (c pgCatalog) AddWorkerEvents(ctx context.Context, name string, epoch int64, events []catalog.Event) error {
	if !oneJob(events) {
		return c.Catalog.AddWorkerEvents(ctx, name, epoch, events)
	}
	err := c.appendLog(ctx, appendLogFenced, &fence{name, epoch}, events)
	if err != nil {
		return fmt.Errorf("catalog: add worker %s's events: %w", name, err)
	}
	return nil
}

// oneJob reports whether events are lines of one job's log.
func oneJob(events []catalog.Event) bool {
	if len(events) == 0 || events[0].JobID == 0 {
		return false
	}
	for _, e := range events[1:] {
		if e.JobID != events[0].JobID {
			return false
		}
	}
	return true
}

// fence is the worker registration a worker's lines need.
type fence struct {
	name  string
	epoch int64
}

// appendLog appends one job's lines with q (behind by's registration
// when set), and sets their Time (now when zero) and Seq as sqlcat does.
// A registration that no longer holds is catalog.ErrFenced, a missing
// job or task catalog.ErrNotFound.
func (c pgCatalog) appendLog(ctx context.Context, q string, by *fence, events []catalog.Event) error {
	n, job, now := int64(len(events)), events[0].JobID, time.Now()
	times, tasks := make([]time.Time, n), make([]*int64, n)
	levels, kinds, messages, fields := make([]string, n), make([]string, n), make([]string, n), make([]*string, n)
	for i := range events {
		e := &events[i]
		if e.Time.IsZero() {
			e.Time = now
		}
		if len(e.Fields) > 0 { // empty fields are NULL, as sqlcat stores them
			b, err := json.Marshal(e.Fields)
			if err != nil {
				return fmt.Errorf("fields of %q: %w", e.Kind, err)
			}
			s := string(b)
			fields[i] = &s
		}
		if e.TaskID != 0 {
			tasks[i] = &e.TaskID
		}
		times[i], levels[i], kinds[i], messages[i] = e.Time.UTC().Truncate(time.Microsecond), e.Level, e.Kind, e.Message
	}
	args := []any{n, job, times, tasks, levels, kinds, messages, fields, strconv.FormatInt(job, 10) + " " + catalog.NoticeLog}
	if by != nil {
		args = append(args, by.name, by.epoch, string(catalog.WorkerLost))
	}
	var live, noted int64
	var base *int64
	err := c.b.writeStatement(ctx, q, args, func(r sqlcat.Rows) error { return r.Scan(&live, &base, &noted) })
	switch {
	case err != nil && isForeignKeyViolation(err):
		return fmt.Errorf("%w: event refers to a job or task that does not exist", catalog.ErrNotFound)
	case err != nil:
		return err
	case live == 0:
		return c.Fenced(ctx, by.name, by.epoch)
	case base == nil:
		return fmt.Errorf("%w: an event refers to job %d, which does not exist", catalog.ErrNotFound, job)
	}
	for i := range events {
		events[i].Seq = *base + int64(i) + 1
	}
	return nil
}
