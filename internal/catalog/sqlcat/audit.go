package sqlcat

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/coffer-backup/coffer/internal/catalog"
)

const auditColumns = `occurred_at, user_name, token_id, operation, object_path, result, error_class, remote_addr,
	detail`

func (c *Catalog) auditRows(records []catalog.AuditRecord) ([][]any, error) {
	now := c.now()
	rows := make([][]any, len(records))
	for i, r := range records {
		if r.Time.IsZero() {
			r.Time = now
		}
		switch r.Result {
		case catalog.AuditOK, catalog.AuditDenied, catalog.AuditError:
		default:
			return nil, fmt.Errorf("audit record of %q: result %q is not %q, %q or %q", r.Operation, r.Result,
				catalog.AuditOK, catalog.AuditDenied, catalog.AuditError)
		}
		if r.Operation == "" {
			return nil, fmt.Errorf("audit record without an operation")
		}
		rows[i] = []any{c.timeArg(r.Time), r.User, r.TokenID, r.Operation, r.Object, r.Result, r.ErrorClass, r.RemoteAddr,
			r.Detail}
	}
	return rows, nil
}

const insertAudit = `INSERT INTO audit_log (` + auditColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`

// AppendAudit adds records in one transaction.
func (c *Catalog) AppendAudit(ctx context.Context, records []catalog.AuditRecord) error {
	if len(records) == 0 {
		return nil
	}
	rows, err := c.auditRows(records)
	if err != nil {
		return fmt.Errorf("catalog: append audit: %w", err)
	}
	q := c.d.Rebind(insertAudit)
	err = c.b.Write(ctx, func(tx Tx) error {
		_, err := tx.ExecBatch(ctx, q, rows)
		return err
	})
	if err != nil {
		return fmt.Errorf("catalog: append audit: %w", err)
	}
	return nil
}

// AppendAudit adds records in the access transaction, so that a change
// and its record are written together or not at all.
func (t *accessTx) AppendAudit(ctx context.Context, records []catalog.AuditRecord) error {
	if len(records) == 0 {
		return nil
	}
	rows, err := t.c.auditRows(records)
	if err != nil {
		return fmt.Errorf("catalog: append audit: %w", err)
	}
	if _, err := t.tx.ExecBatch(ctx, t.c.d.Rebind(insertAudit), rows); err != nil {
		return fmt.Errorf("catalog: append audit: %w", err)
	}
	return nil
}

// ListAudit lists audit records newest first (by ID).
func (c *Catalog) ListAudit(ctx context.Context, f catalog.AuditFilter) ([]catalog.AuditRecord, error) {
	w := &where{}
	for _, eq := range []struct{ col, v string }{
		{"user_name", f.User}, {"token_id", f.TokenID}, {"operation", f.Operation}, {"result", f.Result},
	} {
		if eq.v != "" {
			w.add(eq.col+" = ?", eq.v)
		}
	}
	if f.Object != "" && f.Object != "/" {
		// The object and everything below it, on a path boundary: /a
		// matches /a and /a/b, not /ab. substr counts characters in
		// both databases.
		below := f.Object + "/"
		w.conds = append(w.conds, "(object_path = ? OR substr(object_path, 1, ?) = ?)")
		w.args = append(w.args, f.Object, utf8.RuneCountInString(below), below)
	}
	if !f.Since.IsZero() {
		w.add("occurred_at >= ?", c.timeArg(f.Since))
	}
	if !f.Until.IsZero() {
		w.add("occurred_at < ?", c.timeArg(f.Until))
	}
	if f.BeforeID > 0 {
		w.add("id < ?", f.BeforeID)
	}
	q, args := w.finish("SELECT id, "+auditColumns+" FROM audit_log", "id DESC", f.Limit)
	var out []catalog.AuditRecord
	err := c.query(ctx, q, args, func(r Rows) error {
		var a catalog.AuditRecord
		err := r.Scan(&a.ID, timeDest{&a.Time}, &a.User, &a.TokenID, &a.Operation, &a.Object, &a.Result, &a.ErrorClass,
			&a.RemoteAddr, &a.Detail)
		out = append(out, a)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: list audit: %w", err)
	}
	return out, nil
}
