package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogtest"
	"github.com/coffer-backup/coffer/internal/catalog/sqlite"
)

// TestDump runs the dump suite, whose EveryTableIsDeclared fails on a
// table of the schema that internal/catalog/tables.go does not declare.
func TestDump(t *testing.T) {
	catalogtest.RunDump(t, func(t *testing.T) catalogtest.Opener {
		path := filepath.Join(t.TempDir(), "catalog.db")
		return func(ctx context.Context) (catalog.Catalog, error) {
			return sqlite.Open(ctx, path, sqlite.Options{})
		}
	})
}
