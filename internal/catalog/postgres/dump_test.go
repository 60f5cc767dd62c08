package postgres_test

import (
	"context"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogtest"
	"github.com/coffer-backup/coffer/internal/catalog/postgres"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestDump runs the dump suite on PostgreSQL, each test in schemas of
// its own.
func TestDump(t *testing.T) {
	server := testutil.StartPostgres(t)
	catalogtest.RunDump(t, func(t *testing.T) catalogtest.Opener {
		dsn := freshSchema(t, server)
		return func(ctx context.Context) (catalog.Catalog, error) {
			return postgres.Open(ctx, dsn, postgres.Options{})
		}
	})
}
