package sqlcat

import (
	"context"
	"fmt"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// PutReplica records a run: a good one's state, or a failure (LastError),
// which keeps the points of the last good run.
func (c *Catalog) PutReplica(ctx context.Context, r catalog.Replica) error {
	set := `last_error = excluded.last_error`
	if r.LastError == "" {
		set = `host = excluded.host, directory = excluded.directory, source_time = excluded.source_time,
		replicated_at = excluded.replicated_at, points = excluded.points, last_error = ''`
	}
	err := c.b.Write(ctx, func(tx Tx) error {
		_, err := tx.Exec(ctx, c.d.Rebind(`INSERT INTO replicas (replication, vm, host, directory, source_time, replicated_at, points, last_error)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (replication, vm) DO UPDATE SET `+set),
			r.Replication, r.VM, r.Host, r.Directory, c.timeArg(r.SourceTime), c.timeArg(r.ReplicatedAt), r.Points, r.LastError)
		return err
	})
	if err != nil {
		return fmt.Errorf("catalog: record the replica of %s (%s): %w", r.VM, r.Replication, err)
	}
	return nil
}

// ListReplicas lists the standbys, by replication and VM.
func (c *Catalog) ListReplicas(ctx context.Context, replication string) ([]catalog.Replica, error) {
	rows, err := c.b.Query(ctx, c.d.Rebind(`SELECT replication, vm, host, directory, source_time, replicated_at, points, last_error
		FROM replicas WHERE ? IN ('', replication) ORDER BY replication, vm`), replication)
	if err != nil {
		return nil, fmt.Errorf("catalog: list replicas: %w", err)
	}
	defer rows.Close()
	var out []catalog.Replica
	for rows.Next() {
		var r catalog.Replica
		if err := rows.Scan(&r.Replication, &r.VM, &r.Host, &r.Directory, timeDest{&r.SourceTime}, timeDest{&r.ReplicatedAt}, &r.Points, &r.LastError); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
