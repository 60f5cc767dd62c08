package sqlcat

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// vmColumns are the columns of a VM row, in the order vmArgs binds and
// scanVM reads them.
const vmColumns = `connection, id, name, host, datastores, tags, bytes, last_seen,
	power_state, change_tracking, guest_agent, disks, policies, protected, busy`

const vmPlaceholders = `?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?`

// vmUpdate rewrites every column of a VM row but its key.
const vmUpdate = `name = excluded.name, host = excluded.host, datastores = excluded.datastores, tags = excluded.tags,
	bytes = excluded.bytes, last_seen = excluded.last_seen, power_state = excluded.power_state,
	change_tracking = excluded.change_tracking, guest_agent = excluded.guest_agent, disks = excluded.disks,
	policies = excluded.policies, protected = excluded.protected, busy = excluded.busy`

func (c *Catalog) vmArgs(v catalog.VMRecord) ([]any, error) {
	if v.ID == "" {
		return nil, fmt.Errorf("VM %q of %q has no ID", v.Name, v.Connection)
	}
	ds, err := jsonArg(v.Datastores, len(v.Datastores))
	if err != nil {
		return nil, err
	}
	tags, err := jsonArg(v.Tags, len(v.Tags))
	if err != nil {
		return nil, err
	}
	disks, err := jsonArg(v.Disks, len(v.Disks))
	if err != nil {
		return nil, err
	}
	policies, err := jsonArg(v.Policies, len(v.Policies))
	if err != nil {
		return nil, err
	}
	return []any{v.Connection, v.ID, v.Name, v.Host, ds, tags, v.Bytes, c.timeArg(v.LastSeen),
		v.PowerState, v.ChangeTracking, v.GuestAgent, disks, policies, v.Protected, v.Busy}, nil
}

func scanVM(r Rows) (catalog.VMRecord, error) {
	var v catalog.VMRecord
	err := r.Scan(&v.Connection, &v.ID, &v.Name, &v.Host, jsonDest{&v.Datastores}, jsonDest{&v.Tags}, &v.Bytes,
		timeDest{&v.LastSeen}, &v.PowerState, &v.ChangeTracking, &v.GuestAgent, jsonDest{&v.Disks}, jsonDest{&v.Policies},
		&v.Protected, &v.Busy)
	return v, err
}

// vmBriefColumns are the columns of a brief VM row
// (catalog.InventoryFilter.Brief), in the order scanBriefVM reads them.
const vmBriefColumns = `connection, id, name, host, datastores, tags, protected`

func scanBriefVM(r Rows) (catalog.VMRecord, error) {
	var v catalog.VMRecord
	err := r.Scan(&v.Connection, &v.ID, &v.Name, &v.Host, jsonDest{&v.Datastores}, jsonDest{&v.Tags}, &v.Protected)
	return v, err
}

// sortedVMs orders VMs by key, which keeps concurrent upserts from
// deadlocking.
func sortedVMs(vms []catalog.VMRecord) []catalog.VMRecord {
	sorted := slices.Clone(vms)
	slices.SortStableFunc(sorted, func(a, b catalog.VMRecord) int {
		return cmp.Or(cmp.Compare(a.Connection, b.Connection), cmp.Compare(a.ID, b.ID))
	})
	return sorted
}

// PutVMs upserts inventory records by (Connection, ID).
func (c *Catalog) PutVMs(ctx context.Context, vms []catalog.VMRecord) error {
	if len(vms) == 0 {
		return nil
	}
	sorted := sortedVMs(vms)
	rows := make([][]any, len(sorted))
	for i, v := range sorted {
		args, err := c.vmArgs(v)
		if err != nil {
			return fmt.Errorf("catalog: put VMs: %w", err)
		}
		rows[i] = args
	}
	q := c.d.Rebind(`INSERT INTO vms (` + vmColumns + `) VALUES (` + vmPlaceholders + `)
		ON CONFLICT (connection, id) DO UPDATE SET ` + vmUpdate)
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
	err := c.query(ctx, `SELECT `+vmColumns+` FROM vms ORDER BY connection, name, id`, nil, func(r Rows) error {
		v, err := scanVM(r)
		out = append(out, v)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: list VMs: %w", err)
	}
	return out, nil
}
