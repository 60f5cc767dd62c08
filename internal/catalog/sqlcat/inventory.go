package sqlcat

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// inventoryLock orders the refreshes of one connection across processes,
// so that a replace reads the state it compares its time with unchanged.
func inventoryLock(connection string) string { return "coffer.catalog.inventory/" + connection }

// ReplaceInventory implements catalog.Inventory: the listed VMs are
// upserted with `at` as their last_seen, so that the rows left with
// another last_seen are those of VMs no longer listed.
func (c *Catalog) ReplaceInventory(ctx context.Context, connection string, at time.Time, vms []catalog.VMRecord) error {
	if at.IsZero() {
		return fmt.Errorf("catalog: replace inventory of %s: no time", connection)
	}
	at = normTime(at)
	var listed, busy [][]any
	for _, v := range sortedVMs(vms) {
		v.Connection, v.LastSeen = connection, at
		args, err := c.vmArgs(v)
		if err != nil {
			return fmt.Errorf("catalog: replace inventory: %w", err)
		}
		if v.Busy {
			busy = append(busy, args)
		} else {
			listed = append(listed, args)
		}
	}
	insert := `INSERT INTO vms (` + vmColumns + `) VALUES (` + vmPlaceholders + `) ON CONFLICT (connection, id) DO UPDATE SET `
	upsert := c.d.Rebind(insert + vmUpdate)
	// A busy VM keeps its last known state; only the flag and the time
	// that keeps it from being deleted change.
	keep := c.d.Rebind(insert + `busy = excluded.busy, last_seen = excluded.last_seen`)
	err := c.b.Write(ctx, func(tx Tx) error {
		if err := c.d.lock(ctx, tx, inventoryLock(connection), true); err != nil {
			return err
		}
		newer, err := c.refreshedAfter(ctx, tx, connection, at)
		if err != nil || newer {
			return err
		}
		for _, b := range []struct {
			q    string
			rows [][]any
		}{{upsert, listed}, {keep, busy}} {
			if len(b.rows) == 0 {
				continue
			}
			if _, err := tx.ExecBatch(ctx, b.q, b.rows); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, c.d.Rebind(`DELETE FROM vms WHERE connection = ? AND (last_seen IS NULL OR last_seen <> ?)`),
			connection, c.timeArg(at)); err != nil {
			return err
		}
		// An attempt recorded later (a failure) keeps its time and error.
		_, err = tx.Exec(ctx, c.d.Rebind(`INSERT INTO inventory_refresh (connection, refreshed_at, attempted_at, error, vms)
			VALUES (?, ?, ?, '', ?)
			ON CONFLICT (connection) DO UPDATE SET refreshed_at = excluded.refreshed_at, vms = excluded.vms,
				error = CASE WHEN inventory_refresh.attempted_at > excluded.attempted_at THEN inventory_refresh.error ELSE '' END,
				attempted_at = CASE WHEN inventory_refresh.attempted_at > excluded.attempted_at
					THEN inventory_refresh.attempted_at ELSE excluded.attempted_at END`),
			connection, c.timeArg(at), c.timeArg(at), len(vms))
		return err
	})
	if err != nil {
		return fmt.Errorf("catalog: replace inventory of %s: %w", connection, err)
	}
	return nil
}

// refreshedAfter reports whether connection's last successful refresh is
// newer than at.
func (c *Catalog) refreshedAfter(ctx context.Context, tx Tx, connection string, at time.Time) (bool, error) {
	rows, err := tx.Query(ctx, c.d.Rebind(`SELECT refreshed_at FROM inventory_refresh WHERE connection = ?`), connection)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	var last time.Time
	if rows.Next() {
		if err := rows.Scan(timeDest{&last}); err != nil {
			return false, err
		}
	}
	return last.After(at), rows.Err()
}

// RecordInventoryFailure implements catalog.Inventory.
func (c *Catalog) RecordInventoryFailure(ctx context.Context, connection string, at time.Time, msg string) error {
	if at.IsZero() || msg == "" {
		return fmt.Errorf("catalog: record inventory failure of %s: no time or no message", connection)
	}
	err := c.b.Write(ctx, func(tx Tx) error {
		if err := c.d.lock(ctx, tx, inventoryLock(connection), true); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, c.d.Rebind(`INSERT INTO inventory_refresh (connection, attempted_at, error) VALUES (?, ?, ?)
			ON CONFLICT (connection) DO UPDATE SET attempted_at = excluded.attempted_at, error = excluded.error`),
			connection, c.timeArg(at), msg)
		return err
	})
	if err != nil {
		return fmt.Errorf("catalog: record inventory failure of %s: %w", connection, err)
	}
	return nil
}

// ListInventory implements catalog.Inventory. The keyset condition is
// written with `connection >= ?` beside its OR, so that the range of
// vms_listing starts at the cursor instead of the index's start.
func (c *Catalog) ListInventory(ctx context.Context, f catalog.InventoryFilter) ([]catalog.VMRecord, error) {
	var w where
	if len(f.Connections) > 0 {
		args := make([]any, len(f.Connections))
		for i, n := range f.Connections {
			args[i] = n
		}
		w.add("connection IN ("+strings.TrimSuffix(strings.Repeat("?, ", len(args)), ", ")+")", args...)
	}
	switch f.Protection {
	case "":
	case catalog.Protected:
		w.add("protected = ?", true)
	case catalog.Unprotected:
		w.add("protected = ?", false)
	default:
		return nil, fmt.Errorf("catalog: list inventory: unknown protection filter %q", f.Protection)
	}
	if f.NameContains != "" {
		w.add(`lower(name) LIKE ? ESCAPE '\'`, "%"+likeEscaper.Replace(strings.ToLower(f.NameContains))+"%")
	}
	if f.Search != "" {
		w.add(`lower(name || ' ' || connection) LIKE ? ESCAPE '\'`, "%"+likeEscaper.Replace(strings.ToLower(f.Search))+"%")
	}
	if len(f.VMs) > 0 {
		cond, args := vmsAmong(f.VMs)
		w.add(cond, args...)
	}
	if a := f.After; a != (catalog.VMCursor{}) {
		w.add(vmsAfter, a.Connection, a.Connection, a.Connection, a.Name, a.Name, a.ID)
	}
	columns, scan := vmColumns, scanVM
	if f.Brief {
		columns, scan = vmBriefColumns, scanBriefVM
	}
	q, args := w.finish(`SELECT `+columns+` FROM vms`, "connection, name, id", f.Limit)
	var out []catalog.VMRecord
	err := c.query(ctx, q, args, func(r Rows) error {
		v, err := scan(r)
		out = append(out, v)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: list inventory: %w", err)
	}
	return out, nil
}

// vmsAmong is the condition that keeps these VMs: per connection, its
// IDs, each arm a range of the primary key (connection, id).
func vmsAmong(vms []catalog.VMRef) (string, []any) {
	ids := map[string][]any{}
	var conns []string
	for _, v := range vms {
		if _, ok := ids[v.Connection]; !ok {
			conns = append(conns, v.Connection)
		}
		ids[v.Connection] = append(ids[v.Connection], v.ID)
	}
	arms := make([]string, len(conns))
	var args []any
	for i, conn := range conns {
		arms[i] = "(connection = ? AND id IN (" + strings.TrimSuffix(strings.Repeat("?, ", len(ids[conn])), ", ") + "))"
		args = append(append(args, conn), ids[conn]...)
	}
	return "(" + strings.Join(arms, " OR ") + ")", args
}

// vmsAfter is the keyset condition of a page of the inventory after a
// cursor (connection, name, ID).
const vmsAfter = "connection >= ? AND (connection > ? OR (connection = ? AND (name > ? OR (name = ? AND id > ?))))"

// likeEscaper escapes LIKE's wildcards (and its escape character) in a
// search text.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// InventoryStates implements catalog.Inventory.
func (c *Catalog) InventoryStates(ctx context.Context) ([]catalog.InventoryState, error) {
	var out []catalog.InventoryState
	err := c.query(ctx, `SELECT connection, refreshed_at, attempted_at, error, vms FROM inventory_refresh ORDER BY connection`, nil,
		func(r Rows) error {
			var s catalog.InventoryState
			err := r.Scan(&s.Connection, timeDest{&s.RefreshedAt}, timeDest{&s.AttemptedAt}, &s.Error, &s.VMs)
			out = append(out, s)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("catalog: inventory states: %w", err)
	}
	return out, nil
}
