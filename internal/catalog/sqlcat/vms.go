package sqlcat

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// PutVMs upserts inventory records by (Connection, ID).
func (c *Catalog) PutVMs(ctx context.Context, vms []catalog.VMRecord) error {
	if len(vms) == 0 {
		return nil
	}
	// Key order keeps concurrent upserts from deadlocking.
	sorted := slices.Clone(vms)
	slices.SortStableFunc(sorted, func(a, b catalog.VMRecord) int {
		return cmp.Or(cmp.Compare(a.Connection, b.Connection), cmp.Compare(a.ID, b.ID))
	})
	rows := make([][]any, len(sorted))
	for i, v := range sorted {
		if v.ID == "" {
			return fmt.Errorf("catalog: put VMs: VM %q of %q has no ID", v.Name, v.Connection)
		}
		ds, err := jsonArg(v.Datastores, len(v.Datastores))
		if err != nil {
			return fmt.Errorf("catalog: put VMs: %w", err)
		}
		tags, err := jsonArg(v.Tags, len(v.Tags))
		if err != nil {
			return fmt.Errorf("catalog: put VMs: %w", err)
		}
		rows[i] = []any{v.Connection, v.ID, v.Name, v.Host, ds, tags, v.Bytes, c.timeArg(v.LastSeen)}
	}
	q := c.d.Rebind(`INSERT INTO vms (connection, id, name, host, datastores, tags, bytes, last_seen)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (connection, id) DO UPDATE SET name = excluded.name, host = excluded.host,
			datastores = excluded.datastores, tags = excluded.tags, bytes = excluded.bytes,
			last_seen = excluded.last_seen`)
	err := c.b.Write(ctx, func(tx Tx) error {
		_, err := tx.ExecBatch(ctx, q, rows)
		return err
	})
	if err != nil {
		return fmt.Errorf("catalog: put VMs: %w", err)
	}
	return nil
}

// ListVMs lists the inventory by connection, name and ID.
func (c *Catalog) ListVMs(ctx context.Context) ([]catalog.VMRecord, error) {
	var out []catalog.VMRecord
	err := c.query(ctx, `SELECT connection, id, name, host, datastores, tags, bytes, last_seen FROM vms
		ORDER BY connection, name, id`, nil, func(r Rows) error {
		var v catalog.VMRecord
		err := r.Scan(&v.Connection, &v.ID, &v.Name, &v.Host, jsonDest{&v.Datastores}, jsonDest{&v.Tags}, &v.Bytes,
			timeDest{&v.LastSeen})
		out = append(out, v)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: list VMs: %w", err)
	}
	return out, nil
}
