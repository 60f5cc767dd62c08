package sqlcat

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

const deliveryColumns = `d.id, d.event_id, d.target, d.status, d.attempts, d.last_error, d.created_at,
	d.last_attempt_at, d.next_attempt_at, d.delivered_at,
	e.id, e.occurred_at, e.type, e.severity, e.object, e.title, e.data`

const deliveryFrom = ` FROM notification_deliveries d JOIN notification_events e ON e.id = d.event_id`

func scanDelivery(r Rows) (catalog.Delivery, error) {
	var d catalog.Delivery
	var status string
	e := &d.Event
	err := r.Scan(&d.ID, &d.EventID, &d.Target, &status, &d.Attempts, &d.LastError, timeDest{&d.CreatedAt},
		timeDest{&d.LastAttemptAt}, timeDest{&d.NextAttemptAt}, timeDest{&d.DeliveredAt},
		&e.ID, timeDest{&e.Time}, &e.Type, &e.Severity, &e.Object, &e.Title, rawJSONDest{&e.Data})
	d.Status = catalog.DeliveryStatus(status)
	return d, err
}

// rawJSONDest scans a JSON column (TEXT or JSONB) as its bytes.
type rawJSONDest struct{ p *[]byte }

func (s rawJSONDest) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		*s.p = nil
	case string:
		*s.p = []byte(x)
	case []byte:
		*s.p = slices.Clone(x)
	default:
		return fmt.Errorf("catalog: cannot scan %T as JSON", v)
	}
	return nil
}

// AddNotification records an event and its pending deliveries at once.
func (c *Catalog) AddNotification(ctx context.Context, ev *catalog.NotificationEvent, targets []string) ([]catalog.Delivery, error) {
	if len(targets) == 0 {
		return nil, errors.New("catalog: add notification: no target")
	}
	if len(ev.Data) == 0 {
		return nil, errors.New("catalog: add notification: no event data")
	}
	now := normTime(c.now())
	if ev.Time.IsZero() {
		ev.Time = now
	}
	qe := c.d.Rebind(`INSERT INTO notification_events (occurred_at, type, severity, object, title, data)
		VALUES (?, ?, ?, ?, ?, ?) RETURNING id`)
	qd := c.d.Rebind(`INSERT INTO notification_deliveries (event_id, target, status, created_at, next_attempt_at)
		VALUES (?, ?, ?, ?, ?) RETURNING id`)
	var eventID int64
	var ids []int64
	err := c.b.Write(ctx, func(tx Tx) error {
		got, err := tx.InsertBatch(ctx, qe, [][]any{{c.timeArg(ev.Time), ev.Type, ev.Severity, ev.Object, ev.Title,
			string(ev.Data)}})
		if err != nil {
			return err
		}
		eventID = got[0]
		rows := make([][]any, len(targets))
		for i, t := range targets {
			rows[i] = []any{eventID, t, string(catalog.DeliveryPending), c.timeArg(now), c.timeArg(now)}
		}
		ids, err = tx.InsertBatch(ctx, qd, rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: add notification: %w", err)
	}
	ev.ID = eventID
	ev.Time = normTime(ev.Time)
	out := make([]catalog.Delivery, len(targets))
	for i, t := range targets {
		out[i] = catalog.Delivery{ID: ids[i], EventID: eventID, Target: t, Status: catalog.DeliveryPending,
			CreatedAt: now, NextAttemptAt: now, Event: *ev}
	}
	return out, nil
}

// ClaimDeliveries takes due pending deliveries for now+lease. The update
// re-checks that each one is still due, so that of two processes claiming
// at once (PostgreSQL re-evaluates the condition on the row the other one
// committed) only one gets it; rows are updated in ID order so that they
// cannot deadlock.
func (c *Catalog) ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]catalog.Delivery, error) {
	if limit <= 0 {
		return nil, nil
	}
	now = normTime(now)
	until := normTime(now.Add(lease))
	var out []catalog.Delivery
	err := c.b.Write(ctx, func(tx Tx) error {
		out = nil
		rows, err := tx.Query(ctx, c.d.Rebind(`SELECT id FROM notification_deliveries
			WHERE status = ? AND next_attempt_at <= ? ORDER BY next_attempt_at, id LIMIT ?`),
			string(catalog.DeliveryPending), c.timeArg(now), limit)
		if err != nil {
			return err
		}
		var due []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			due = append(due, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(due) == 0 {
			return err
		}
		slices.Sort(due)
		args := make([][]any, len(due))
		for i, id := range due {
			args[i] = []any{c.timeArg(until), id, string(catalog.DeliveryPending), c.timeArg(now)}
		}
		n, err := tx.ExecBatch(ctx, c.d.Rebind(`UPDATE notification_deliveries SET next_attempt_at = ?
			WHERE id = ? AND status = ? AND next_attempt_at <= ?`), args)
		if err != nil {
			return err
		}
		var claimed []any
		for i, id := range due {
			if n[i] == 1 {
				claimed = append(claimed, id)
			}
		}
		if len(claimed) == 0 {
			return nil
		}
		q := "SELECT " + deliveryColumns + deliveryFrom + " WHERE d.id IN (" +
			strings.TrimSuffix(strings.Repeat("?, ", len(claimed)), ", ") + ") ORDER BY d.id"
		rows, err = tx.Query(ctx, c.d.Rebind(q), claimed...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			d, err := scanDelivery(rows)
			if err != nil {
				return err
			}
			out = append(out, d)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: claim deliveries: %w", err)
	}
	return out, nil
}

// RecordDeliveryAttempt stores the outcome of one attempt.
func (c *Catalog) RecordDeliveryAttempt(ctx context.Context, a catalog.DeliveryAttempt) error {
	if a.At.IsZero() {
		a.At = c.now()
	}
	var next, delivered any
	switch a.Status {
	case catalog.DeliveryPending:
		next = c.timeArg(a.Next)
		if next == nil {
			next = c.timeArg(a.At)
		}
	case catalog.DeliveryDelivered:
		delivered = c.timeArg(a.At)
	case catalog.DeliveryFailed:
	default:
		return fmt.Errorf("catalog: record delivery attempt: unknown status %q", a.Status)
	}
	err := c.b.Write(ctx, func(tx Tx) error {
		n, err := tx.Exec(ctx, c.d.Rebind(`UPDATE notification_deliveries SET status = ?, attempts = attempts + 1,
			last_error = ?, last_attempt_at = ?, next_attempt_at = ?, delivered_at = ? WHERE id = ? AND status = ?`),
			string(a.Status), a.Error, c.timeArg(a.At), next, delivered, a.ID, string(catalog.DeliveryPending))
		if err != nil || n == 1 {
			return err
		}
		return c.deliveryExists(ctx, tx, a.ID)
	})
	if err != nil {
		return fmt.Errorf("catalog: record delivery attempt: %w", err)
	}
	return nil
}

func (c *Catalog) deliveryExists(ctx context.Context, tx Tx, id int64) error {
	rows, err := tx.Query(ctx, c.d.Rebind(`SELECT status FROM notification_deliveries WHERE id = ?`), id)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return fmt.Errorf("%w: delivery %d", catalog.ErrNotFound, id)
	}
	return nil
}

// RetryDelivery makes a failed delivery pending again.
func (c *Catalog) RetryDelivery(ctx context.Context, id int64, at time.Time) error {
	err := c.b.Write(ctx, func(tx Tx) error {
		n, err := tx.Exec(ctx, c.d.Rebind(`UPDATE notification_deliveries SET status = ?, next_attempt_at = ?
			WHERE id = ? AND status = ?`), string(catalog.DeliveryPending), c.timeArg(at), id, string(catalog.DeliveryFailed))
		if err != nil || n == 1 {
			return err
		}
		if err := c.deliveryExists(ctx, tx, id); err != nil {
			return err
		}
		return fmt.Errorf("%w: delivery %d", catalog.ErrNotFailed, id)
	})
	if err != nil {
		return fmt.Errorf("catalog: retry delivery: %w", err)
	}
	return nil
}

// NextDeliveryDue is the earliest next attempt of a pending delivery.
func (c *Catalog) NextDeliveryDue(ctx context.Context) (time.Time, error) {
	var t time.Time
	err := c.query(ctx, `SELECT MIN(next_attempt_at) FROM notification_deliveries WHERE status = ?`,
		[]any{string(catalog.DeliveryPending)}, func(r Rows) error { return r.Scan(timeDest{&t}) })
	if err != nil {
		return time.Time{}, fmt.Errorf("catalog: next delivery due: %w", err)
	}
	return t, nil
}

// GetDelivery reads one delivery with its event.
func (c *Catalog) GetDelivery(ctx context.Context, id int64) (catalog.Delivery, error) {
	ds, err := c.listDeliveries(ctx, &where{conds: []string{"d.id = ?"}, args: []any{id}}, 1)
	if err != nil {
		return catalog.Delivery{}, err
	}
	if len(ds) == 0 {
		return catalog.Delivery{}, fmt.Errorf("%w: delivery %d", catalog.ErrNotFound, id)
	}
	return ds[0], nil
}

// ListDeliveries lists deliveries newest first.
func (c *Catalog) ListDeliveries(ctx context.Context, f catalog.DeliveryFilter) ([]catalog.Delivery, error) {
	w := &where{}
	if f.Status != "" {
		w.add("d.status = ?", string(f.Status))
	}
	if f.Target != "" {
		w.add("d.target = ?", f.Target)
	}
	if f.EventID != 0 {
		w.add("d.event_id = ?", f.EventID)
	}
	if !f.Since.IsZero() {
		w.add("d.created_at >= ?", c.timeArg(f.Since))
	}
	return c.listDeliveries(ctx, w, f.Limit)
}

func (c *Catalog) listDeliveries(ctx context.Context, w *where, limit int) ([]catalog.Delivery, error) {
	q, args := w.finish("SELECT "+deliveryColumns+deliveryFrom, "d.created_at DESC, d.id DESC", limit)
	var out []catalog.Delivery
	err := c.query(ctx, q, args, func(r Rows) error {
		d, err := scanDelivery(r)
		out = append(out, d)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: list deliveries: %w", err)
	}
	return out, nil
}

// PruneNotifications deletes old events none of whose deliveries is
// pending; their deliveries go with them (ON DELETE CASCADE).
func (c *Catalog) PruneNotifications(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := c.b.Write(ctx, func(tx Tx) error {
		var err error
		n, err = tx.Exec(ctx, c.d.Rebind(`DELETE FROM notification_events WHERE occurred_at < ? AND NOT EXISTS (
			SELECT 1 FROM notification_deliveries d WHERE d.event_id = notification_events.id AND d.status = ?)`),
			c.timeArg(before), string(catalog.DeliveryPending))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("catalog: prune notifications: %w", err)
	}
	return int(n), nil
}
