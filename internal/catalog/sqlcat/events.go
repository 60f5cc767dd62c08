package sqlcat

import (
	"context"
	"fmt"

	"github.com/coffer-backup/coffer/internal/catalog"
)

var eventColumns = []string{"occurred_at", "job_id", "task_id", "level", "kind", "message", "fields"}

// AddEvents inserts events in one transaction; a zero Time becomes now.
func (c *Catalog) AddEvents(ctx context.Context, events []catalog.Event) error {
	if len(events) == 0 {
		return nil
	}
	now := c.now()
	rows := make([][]any, len(events))
	for i, e := range events {
		if e.Time.IsZero() {
			e.Time = now
		}
		fields, err := jsonArg(e.Fields, len(e.Fields))
		if err != nil {
			return fmt.Errorf("catalog: add events: fields of %q: %w", e.Kind, err)
		}
		rows[i] = []any{c.timeArg(e.Time), idArg(e.JobID), idArg(e.TaskID), e.Level, e.Kind, e.Message, fields}
	}
	q := c.d.Rebind(`INSERT INTO events (occurred_at, job_id, task_id, level, kind, message, fields)
		VALUES (?, ?, ?, ?, ?, ?, ?)`)
	err := c.b.Write(ctx, func(tx Tx) error {
		err := tx.BulkInsert(ctx, "events", eventColumns, q, rows)
		return c.missingRef(err, "event")
	})
	if err != nil {
		return fmt.Errorf("catalog: add events: %w", err)
	}
	return nil
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
	if !f.Since.IsZero() {
		w.add("occurred_at >= ?", c.timeArg(f.Since))
	}
	q, args := w.finish(`SELECT id, occurred_at, job_id, task_id, level, kind, message, fields FROM events`,
		"occurred_at DESC, id DESC", f.Limit)
	var out []catalog.Event
	err := c.query(ctx, q, args, func(r Rows) error {
		var e catalog.Event
		err := r.Scan(&e.ID, timeDest{&e.Time}, idDest{&e.JobID}, idDest{&e.TaskID}, &e.Level, &e.Kind, &e.Message,
			jsonDest{&e.Fields})
		out = append(out, e)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: list events: %w", err)
	}
	return out, nil
}
