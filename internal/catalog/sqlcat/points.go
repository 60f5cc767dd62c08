package sqlcat

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

const pointColumns = `repository, id, taken_at, connection, vm_id, vm_name, mode, parent, disks, bytes_logical,
	bytes_stored, tags, protected, job_id, snapshot_mode, snapshot_mode_achieved, hooks`

// upsertPoint writes one point, replacing a point with the same key.
const upsertPoint = `INSERT INTO backup_points (` + pointColumns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (repository, id) DO UPDATE SET taken_at = excluded.taken_at, connection = excluded.connection,
		vm_id = excluded.vm_id, vm_name = excluded.vm_name, mode = excluded.mode, parent = excluded.parent,
		disks = excluded.disks, bytes_logical = excluded.bytes_logical, bytes_stored = excluded.bytes_stored,
		tags = excluded.tags, protected = excluded.protected, job_id = excluded.job_id,
		snapshot_mode = excluded.snapshot_mode, snapshot_mode_achieved = excluded.snapshot_mode_achieved,
		hooks = excluded.hooks`

// pointsLock names the lock that orders writers of one repository's
// points: upserts and deletes share it, a replace holds it alone.
func pointsLock(repository string) string { return "coffer.catalog.points/" + repository }

func (c *Catalog) pointRows(points []catalog.BackupPoint) ([][]any, []string, error) {
	// Upserts in key order: concurrent writers lock rows in the same
	// order and cannot deadlock.
	sorted := slices.Clone(points)
	slices.SortStableFunc(sorted, func(a, b catalog.BackupPoint) int {
		return cmp.Or(cmp.Compare(a.Repository, b.Repository), cmp.Compare(a.ID, b.ID))
	})
	rows := make([][]any, len(sorted))
	var repos []string
	for i, p := range sorted {
		if p.Repository == "" || p.ID == "" {
			return nil, nil, fmt.Errorf("backup point without a repository or ID: %+v", p)
		}
		tags, err := jsonArg(p.Tags, len(p.Tags))
		if err != nil {
			return nil, nil, err
		}
		rows[i] = []any{p.Repository, p.ID, c.timeArg(p.Time), p.Connection, p.VMID, p.VMName, p.Mode, p.Parent,
			p.Disks, p.BytesLogical, p.BytesStored, tags, p.Protected, p.JobID, p.SnapshotMode, p.SnapshotModeAchieved, p.Hooks}
		if len(repos) == 0 || repos[len(repos)-1] != p.Repository {
			repos = append(repos, p.Repository)
		}
	}
	return rows, repos, nil
}

// PutBackupPoints upserts points by (Repository, ID).
func (c *Catalog) PutBackupPoints(ctx context.Context, points []catalog.BackupPoint) error {
	if len(points) == 0 {
		return nil
	}
	rows, repos, err := c.pointRows(points)
	if err != nil {
		return fmt.Errorf("catalog: put backup points: %w", err)
	}
	q := c.d.Rebind(upsertPoint)
	err = c.b.Write(ctx, func(tx Tx) error {
		for _, r := range repos {
			if err := c.d.lock(ctx, tx, pointsLock(r), false); err != nil {
				return err
			}
		}
		_, err := tx.ExecBatch(ctx, q, rows)
		return err
	})
	if err != nil {
		return fmt.Errorf("catalog: put backup points: %w", err)
	}
	return nil
}

// DeleteBackupPoints removes points; absent ones are ignored.
func (c *Catalog) DeleteBackupPoints(ctx context.Context, repository string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	sorted := slices.Sorted(slices.Values(ids))
	rows := make([][]any, len(sorted))
	for i, id := range sorted {
		rows[i] = []any{repository, id}
	}
	q := c.d.Rebind(`DELETE FROM backup_points WHERE repository = ? AND id = ?`)
	err := c.b.Write(ctx, func(tx Tx) error {
		if err := c.d.lock(ctx, tx, pointsLock(repository), false); err != nil {
			return err
		}
		_, err := tx.ExecBatch(ctx, q, rows)
		return err
	})
	if err != nil {
		return fmt.Errorf("catalog: delete backup points: %w", err)
	}
	return nil
}

// ReplaceBackupPoints makes points the complete set of a repository's
// points, atomically: readers see either the old or the new set.
func (c *Catalog) ReplaceBackupPoints(ctx context.Context, repository string, points []catalog.BackupPoint) error {
	if repository == "" {
		return fmt.Errorf("catalog: replace backup points: no repository given")
	}
	points = slices.Clone(points)
	for i := range points {
		switch points[i].Repository {
		case "":
			points[i].Repository = repository
		case repository:
		default:
			return fmt.Errorf("catalog: replace backup points of %s: point %s belongs to repository %s",
				repository, points[i].ID, points[i].Repository)
		}
	}
	rows, _, err := c.pointRows(points)
	if err != nil {
		return fmt.Errorf("catalog: replace backup points: %w", err)
	}
	del := c.d.Rebind(`DELETE FROM backup_points WHERE repository = ?`)
	ins := c.d.Rebind(upsertPoint)
	err = c.b.Write(ctx, func(tx Tx) error {
		if err := c.d.lock(ctx, tx, pointsLock(repository), true); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, del, repository); err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		_, err := tx.ExecBatch(ctx, ins, rows)
		return err
	})
	if err != nil {
		return fmt.Errorf("catalog: replace backup points: %w", err)
	}
	return nil
}

// pointsAfter selects the points listed after a cursor (time, ID,
// repository).
const pointsAfter = "taken_at <= ? AND (taken_at < ? OR id < ? OR (id = ? AND repository > ?))"

// pointColumnsOf is pointColumns of the table called alias.
func pointColumnsOf(alias string) string {
	cols := strings.Split(pointColumns, ",")
	for i, c := range cols {
		cols[i] = alias + "." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}

// groupedBatch is how many VMs one grouped query looks up, one
// parameter each: well below every database's limit.
const groupedBatch = 10_000

// newestOfIDs selects, for a list of VM IDs, the points taken at the
// newest time of their VM ID: the newest time per ID comes from
// points_vm (vm_id, taken_at) alone, and each point from one more lookup
// of it. The connection is not in that index: a VM ID that two
// connections share yields the points of the one backed up last.
var newestOfIDs = `SELECT ` + pointColumnsOf("p") + ` FROM backup_points p
	JOIN (SELECT vm_id AS newest_vm, MAX(taken_at) AS newest_at FROM backup_points WHERE vm_id IN (%s) GROUP BY vm_id) m
	ON p.vm_id = m.newest_vm AND p.taken_at = m.newest_at`

// newestGrouped finds the newest point of each VM: a grouped query per
// batch of VM IDs, and one more per VM whose ID another connection's VM
// shares and backed up later.
func (c *Catalog) newestGrouped(ctx context.Context, vms []catalog.VMRef) ([]catalog.BackupPoint, error) {
	var ids []any
	seen := map[string]bool{}
	for _, vm := range vms {
		if !seen[vm.ID] {
			seen[vm.ID] = true
			ids = append(ids, vm.ID)
		}
	}
	newest := map[catalog.VMRef]catalog.BackupPoint{}
	found := map[string]bool{} // VM IDs with a newest point, of whichever connection
	for len(ids) > 0 {
		batch := ids[:min(groupedBatch, len(ids))]
		ids = ids[len(batch):]
		q := fmt.Sprintf(newestOfIDs, strings.TrimSuffix(strings.Repeat("?, ", len(batch)), ", "))
		err := c.query(ctx, q, batch, func(r Rows) error {
			p, err := scanPoint(r)
			k := catalog.VMRef{Connection: p.Connection, ID: p.VMID}
			if n, ok := newest[k]; !ok || p.ID > n.ID { // a tie in time: the listing's order
				newest[k] = p
			}
			found[p.VMID] = true
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("catalog: newest backup points: %w", err)
		}
	}
	out := make([]catalog.BackupPoint, 0, len(vms))
	answered := map[catalog.VMRef]bool{} // a VM asked for twice is answered once
	for _, vm := range vms {
		if answered[vm] {
			continue
		}
		answered[vm] = true
		p, ok := newest[vm]
		if !ok && found[vm.ID] { // another connection's VM of that ID was backed up last
			err := c.query(ctx, newestOfVM, []any{vm.ID, vm.Connection}, func(r Rows) error {
				var err error
				p, err = scanPoint(r)
				ok = true
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("catalog: newest backup point of %s/%s: %w", vm.Connection, vm.ID, err)
			}
		}
		if ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// newestOfVM is the newest point of one VM, found by walking points_vm
// (vm_id, taken_at) backwards from the VM's newest point to the first of
// its connection (a VM ID two connections share).
const newestOfVM = `SELECT * FROM (SELECT ` + pointColumns + ` FROM backup_points WHERE vm_id = ? AND connection = ?
	ORDER BY taken_at DESC, id DESC LIMIT 1) AS newest`

// newestOfVMs is newestOfVM for every VM of two arrays (IDs and their
// connections), on a database with Arrays; vm_id compares in its
// column's collation, so that the lookup is in points_conn_vm.
const newestOfVMs = `SELECT p.* FROM unnest(?::text[], ?::text[]) AS v(id, conn)
	CROSS JOIN LATERAL (SELECT ` + pointColumns + ` FROM backup_points
		WHERE vm_id = v.id COLLATE "C" AND connection = v.conn ORDER BY taken_at DESC, id DESC LIMIT 1) AS p`

// NewestBackupPoints finds the newest point of each VM. On a database
// with arrays (PostgreSQL), one statement joins the VMs, unnested from
// two array arguments, laterally to one index lookup each: the same text
// for any number of VMs, and an index lookup per VM in every plan,
// including the generic plan PostgreSQL makes of a prepared statement
// after five runs, without its arguments. A grouped join on the VMs' IDs
// was the wrong shape there: its generic plan, not knowing how few IDs
// there were, hashed the whole table (118 ms for a page of 100 VMs among
// 100,000 points, against 3 ms planned for the IDs); UNION ALLs of one
// lookup per VM, which replaced it, cost their planning (a page of 1000
// VMs was three statements of up to 400 arms). SQLite plans every
// statement anew and keeps the grouped join.
func (c *Catalog) NewestBackupPoints(ctx context.Context, vms []catalog.VMRef) ([]catalog.BackupPoint, error) {
	if !c.d.Arrays {
		return c.newestGrouped(ctx, vms)
	}
	var ids, conns []string
	seen := map[catalog.VMRef]bool{} // a VM asked for twice is answered once
	for _, vm := range vms {
		if !seen[vm] {
			seen[vm] = true
			ids, conns = append(ids, vm.ID), append(conns, vm.Connection)
		}
	}
	out := make([]catalog.BackupPoint, 0, len(ids))
	err := c.query(ctx, newestOfVMs, []any{ids, conns}, func(r Rows) error {
		p, err := scanPoint(r)
		out = append(out, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: newest backup points: %w", err)
	}
	return out, nil
}

// NewestPointTimes implements catalog.Catalog: one grouped scan of the
// points, which at fleet scale (100,000 points) is cheaper than the
// 10,000 index lookups NewestBackupPoints would make, and returns a time
// per VM instead of whole point rows.
func (c *Catalog) NewestPointTimes(ctx context.Context) (map[catalog.VMRef]time.Time, error) {
	out := map[catalog.VMRef]time.Time{}
	err := c.query(ctx, `SELECT connection, vm_id, MAX(taken_at) FROM backup_points GROUP BY connection, vm_id`, nil, func(r Rows) error {
		var ref catalog.VMRef
		var at time.Time
		err := r.Scan(&ref.Connection, &ref.ID, timeDest{&at})
		out[ref] = at
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: newest point times: %w", err)
	}
	return out, nil
}

// NewestPolicyPointTimes implements catalog.Catalog: the database groups
// the points, so that the server reads a row per VM and policy instead of
// every point with its tags (100,000 at fleet scale, every health check).
func (c *Catalog) NewestPolicyPointTimes(ctx context.Context) ([]catalog.PolicyPointTime, error) {
	policy := "COALESCE(" + c.d.JSONText("tags", "policy") + ", '')"
	var out []catalog.PolicyPointTime
	err := c.query(ctx, `SELECT connection, vm_name, `+policy+`, MAX(taken_at) FROM backup_points GROUP BY connection, vm_name, `+policy, nil,
		func(r Rows) error {
			var p catalog.PolicyPointTime
			err := r.Scan(&p.Connection, &p.VMName, &p.Policy, timeDest{&p.Time})
			out = append(out, p)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("catalog: newest point times by policy: %w", err)
	}
	return out, nil
}

func scanPoint(r Rows) (catalog.BackupPoint, error) {
	var p catalog.BackupPoint
	err := r.Scan(&p.Repository, &p.ID, timeDest{&p.Time}, &p.Connection, &p.VMID, &p.VMName, &p.Mode, &p.Parent,
		&p.Disks, &p.BytesLogical, &p.BytesStored, jsonDest{&p.Tags}, &p.Protected, &p.JobID, &p.SnapshotMode, &p.SnapshotModeAchieved, &p.Hooks)
	return p, err
}

// ListBackupPoints lists points newest first.
func (c *Catalog) ListBackupPoints(ctx context.Context, f catalog.BackupPointFilter) ([]catalog.BackupPoint, error) {
	q, args := c.pointsQuery(f)
	var out []catalog.BackupPoint
	err := c.query(ctx, q, args, func(r Rows) error {
		p, err := scanPoint(r)
		out = append(out, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: list backup points: %w", err)
	}
	return out, nil
}

// pointsQuery is ListBackupPoints' statement. A repository's pages walk
// points_repository (repository, taken_at, id) from the cursor down
// (migration 13).
func (c *Catalog) pointsQuery(f catalog.BackupPointFilter) (string, []any) {
	w := &where{}
	if f.Repository != "" {
		w.add("repository = ?", f.Repository)
	}
	if f.VMID != "" {
		w.add("vm_id = ?", f.VMID)
	}
	if f.VMName != "" {
		w.add("vm_name = ?", f.VMName)
	}
	if !f.Since.IsZero() {
		w.add("taken_at >= ?", c.timeArg(f.Since))
	}
	if a := f.After; a.ID != "" {
		// After the cursor in (taken_at DESC, id DESC, repository); the
		// bound on taken_at alone starts points_time at the cursor (see
		// ListJobs).
		at := c.timeArg(a.Time)
		w.add(pointsAfter, at, at, a.ID, a.ID, a.Repository)
	}
	return w.finish("SELECT "+pointColumns+" FROM backup_points", "taken_at DESC, id DESC, repository", f.Limit)
}
