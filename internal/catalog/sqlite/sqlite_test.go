package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogtest"
	"github.com/coffer-backup/coffer/internal/catalog/sqlite"
)

func TestConformance(t *testing.T) {
	catalogtest.Run(t, func(t *testing.T) catalogtest.Opener {
		path := filepath.Join(t.TempDir(), "sub", "catalog.db")
		return func(ctx context.Context) (catalog.Catalog, error) {
			return sqlite.Open(ctx, path, sqlite.Options{})
		}
	})
}
