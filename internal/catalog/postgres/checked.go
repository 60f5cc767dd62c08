package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat"
)

// ErrSchemaSkew refuses a catalog whose schema is not the one this coffer
// speaks, to a process that may not migrate it (a worker's role).
type ErrSchemaSkew struct{ Database, Known int }

func (e ErrSchemaSkew) Error() string {
	if e.Database > e.Known {
		return fmt.Sprintf("catalog schema version %d is newer than this coffer speaks (%d): install the servers' version of coffer here", e.Database, e.Known)
	}
	return fmt.Sprintf("catalog schema version %d is older than this coffer speaks (%d): upgrade the servers first (they migrate the catalog), then this host", e.Database, e.Known)
}

// Is makes a newer schema a catalog.ErrNewerSchema (unsupported-version).
func (e ErrSchemaSkew) Is(target error) bool {
	return target == catalog.ErrNewerSchema && e.Database > e.Known
}

// OpenChecked connects to the database named by dsn without migrating
// it: it checks that the schema is exactly the version this build
// speaks and refuses otherwise (ErrSchemaSkew). A worker opens the
// catalog so: its role may not change the schema, and a worker older or
// newer than the servers' catalog must not write to it.
func OpenChecked(ctx context.Context, dsn string, o Options) (catalog.Catalog, error) {
	b, err := connect(ctx, dsn, o)
	if err != nil {
		return nil, err
	}
	err = checkSchema(ctx, b)
	if err != nil {
		b.pool.Close()
		c := b.pool.Config().ConnConfig
		return nil, fmt.Errorf("%w (catalog on %s:%d as %s)", err, c.Host, c.Port, c.User)
	}
	return newCatalog(b), nil
}

func checkSchema(ctx context.Context, b *backend) error {
	migrations, err := Migrations()
	if err != nil {
		return err
	}
	v, err := sqlcat.SchemaVersion(ctx, b)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" {
		v, err = 0, nil // no schema_migrations: nothing migrated yet
	}
	if err != nil {
		return fmt.Errorf("catalog: read the schema version: %w", err)
	}
	if v != len(migrations) {
		return ErrSchemaSkew{Database: v, Known: len(migrations)}
	}
	return nil
}
