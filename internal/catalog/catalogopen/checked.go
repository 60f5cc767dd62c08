package catalogopen

import (
	"context"
	"fmt"
	"strings"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/postgres"
)

// IsPostgres reports a location of a PostgreSQL catalog.
func IsPostgres(location string) bool {
	return strings.HasPrefix(location, "postgres://") || strings.HasPrefix(location, "postgresql://")
}

// OpenChecked opens the PostgreSQL catalog at location without migrating
// it, and refuses a schema other than the one this build speaks
// (postgres.ErrSchemaSkew); a SQLite location is catalog.ErrNeedsPostgres.
// It is how a fleet's worker opens its servers' catalog.
func OpenChecked(ctx context.Context, location string) (catalog.Catalog, error) {
	if !IsPostgres(location) {
		return nil, fmt.Errorf("%w (this one is %s)", catalog.ErrNeedsPostgres, Redact(location))
	}
	return postgres.OpenChecked(ctx, location, postgres.Options{})
}
