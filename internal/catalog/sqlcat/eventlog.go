package sqlcat

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// StatementWriter is a Backend that runs a write of one statement as a
// transaction of its own (PostgreSQL's autocommit), retried as Write's
// are: one round trip, where Write's begin and commit add two. scan reads
// each row the statement returns.
type StatementWriter interface {
	WriteStatement(ctx context.Context, q string, args []any, scan func(Rows) error) error
}

// A job's log lines are appended many times a second in a large fleet (a
// VM's unit records a few batches, from its worker and from the leader),
// each in a transaction of its own: the job's line count bumped (taking
// its row's lock, which numbers concurrent writers' lines in commit
// order), the lines copied in, the notice. On a database with arrays and
// a StatementWriter, a batch of one job's lines is all that in one
// statement (appendOneLog): a round trip instead of six, the fence of a
// worker's write (asWorker) included. The effects, locks and their order
// are the transaction's.

// appendLogFenced is appendLog behind asWorker's check, in the same
// statement: the worker's row is locked first, as asWorker's transaction
// does, and no line is written unless it holds.
const appendLogFenced = `WITH fence AS (
	UPDATE workers SET epoch = epoch WHERE name = ? AND epoch = ? AND state <> ? RETURNING name),
bump AS (
	UPDATE jobs SET log_lines = log_lines + ? WHERE id = ? AND EXISTS (SELECT FROM fence) RETURNING id, log_lines - ? AS base),
` + appendLines + `
SELECT (SELECT count(*) FROM fence), bump.base, (SELECT count(*) FROM (SELECT %s FROM bump) AS noted)
	FROM (VALUES (1)) AS one (x) LEFT JOIN bump ON true`

const appendLog = `WITH bump AS (
	UPDATE jobs SET log_lines = log_lines + ? WHERE id = ? RETURNING id, log_lines - ? AS base),
` + appendLines + `
SELECT 1, bump.base, (SELECT count(*) FROM (SELECT %s FROM bump) AS noted)
	FROM (VALUES (1)) AS one (x) LEFT JOIN bump ON true`

// appendLines inserts the lines after bump's base, in their order.
const appendLines = `lines AS (
	INSERT INTO events (occurred_at, job_id, task_id, level, kind, message, fields, seq)
	SELECT l.occurred_at, bump.id, l.task_id, l.level, l.kind, l.message, l.fields::jsonb, bump.base + l.n
	FROM bump, unnest(?::timestamptz[], ?::bigint[], ?::text[], ?::text[], ?::text[], ?::text[])
		WITH ORDINALITY AS l (occurred_at, task_id, level, kind, message, fields, n))`

// worker names the registration a fenced write must hold (asWorker).
type worker struct {
	name  string
	epoch int64
}

// oneLog reports whether appendOneLog can write events: a single job's
// lines on a backend that runs a statement alone.
func (c *Catalog) oneLog(events []catalog.Event) (StatementWriter, bool) {
	w, ok := c.b.(StatementWriter)
	if !ok || !c.d.Arrays || c.d.NotifyExpr == nil || events[0].JobID == 0 {
		return nil, false
	}
	for _, e := range events[1:] {
		if e.JobID != events[0].JobID {
			return nil, false
		}
	}
	return w, true
}

// appendOneLog appends one job's lines (oneLog) in one statement, behind
// by's registration unless by is nil, and returns their line numbers. A
// registration that no longer holds is catalog.ErrFenced (asWorker's), a
// missing job catalog.ErrNotFound (appendEvents').
func (c *Catalog) appendOneLog(ctx context.Context, w StatementWriter, by *worker, events []catalog.Event) ([]int64, error) {
	n, job := int64(len(events)), events[0].JobID
	times, tasks := make([]time.Time, n), make([]*int64, n)
	levels, kinds, messages, fields := make([]string, n), make([]string, n), make([]string, n), make([]*string, n)
	for i, e := range events {
		f, err := jsonArg(e.Fields, len(e.Fields))
		if err != nil {
			return nil, fmt.Errorf("fields of %q: %w", e.Kind, err)
		}
		if f != nil {
			s := f.(string)
			fields[i] = &s
		}
		if e.TaskID != 0 {
			tasks[i] = &events[i].TaskID
		}
		times[i], levels[i], kinds[i], messages[i] = normTime(e.Time), e.Level, e.Kind, e.Message
	}
	notice := c.d.NotifyExpr("?")
	q, args := fmt.Sprintf(appendLog, notice), []any{n, job, n}
	if by != nil {
		q, args = fmt.Sprintf(appendLogFenced, notice), []any{by.name, by.epoch, string(catalog.WorkerLost), n, job, n}
	}
	args = append(args, times, tasks, levels, kinds, messages, fields, strconv.FormatInt(job, 10)+" "+catalog.NoticeLog)
	var live, noted int64
	var base *int64
	err := w.WriteStatement(ctx, c.d.Rebind(q), args, func(r Rows) error { return r.Scan(&live, &base, &noted) })
	switch {
	case err != nil:
		return nil, c.missingRef(err, "event")
	case live == 0:
		return nil, c.fenced(ctx, by.name, by.epoch)
	case base == nil:
		return nil, fmt.Errorf("%w: an event refers to job %d, which does not exist", catalog.ErrNotFound, job)
	}
	seqs := make([]int64, n)
	for i := range seqs {
		seqs[i] = *base + int64(i) + 1
	}
	return seqs, nil
}
