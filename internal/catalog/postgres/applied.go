package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// Inspect reads which schema migrations the database named by dsn has
// had, and its leases, over one connection, changing nothing. `coffer
// upgrade check` reads it before an upgrade, and a server watches it for
// a newer coffer's migration.
func Inspect(ctx context.Context, dsn string) (catalog.Inspection, error) {
	in := catalog.Inspection{Applied: map[int]string{}}
	cfg, err := PoolConfig(dsn)
	if err != nil {
		return in, fmt.Errorf("catalog: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return in, fmt.Errorf("catalog: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	rows, err := conn.Query(ctx, `SELECT version, name FROM schema_migrations`)
	if err == nil {
		for rows.Next() {
			var v int
			var name string
			if err = rows.Scan(&v, &name); err != nil {
				break
			}
			in.Applied[v] = name
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if missingTable(err) {
		return in, nil // no schema_migrations: nothing migrated yet
	}
	if err != nil {
		return in, fmt.Errorf("catalog: read the schema version: %w", err)
	}
	rows, err = conn.Query(ctx, `SELECT name, holder, epoch, expires_at FROM leases`)
	if err == nil {
		for rows.Next() {
			var l catalog.Lease
			if err = rows.Scan(&l.Name, &l.Holder, &l.Epoch, &l.ExpiresAt); err != nil {
				break
			}
			in.Leases = append(in.Leases, l)
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if err != nil && !missingTable(err) {
		return in, fmt.Errorf("catalog: read the leases: %w", err)
	}
	return in, nil
}

// missingTable: a table a later migration creates.
func missingTable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42P01"
}
