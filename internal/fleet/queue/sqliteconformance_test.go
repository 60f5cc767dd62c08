package queue_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogtest"
	"github.com/coffer-backup/coffer/internal/catalog/sqlite"
)

// TestSQLiteCatalogConformanceBesideRiver runs the catalog's conformance
// suite on SQLite files that River's tables share, while a River client
// works a job inserted every 10 ms on each: the catalog's behaviour does
// not change with River beside it, and River's jobs all run.
func TestSQLiteCatalogConformanceBesideRiver(t *testing.T) {
	var ran, inserted atomic.Int64
	catalogtest.Run(t, func(t *testing.T) catalogtest.Opener {
		ctx := context.Background()
		path := filepath.Join(t.TempDir(), "sub", "catalog.db")
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		cat, err := sqlite.Open(ctx, path, sqlite.Options{}) // the file, in WAL mode, before River opens it
		if err != nil {
			t.Fatal(err)
		}
		_ = cat.Close()
		var errs atomic.Int64
		started := make(chan time.Time, 1<<16)
		c := sqliteClient(t, openRiverSQLite(t, path), &sqliteWorker{started: started}, &errs)
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		stop, stopped := make(chan struct{}), make(chan struct{})
		var mine atomic.Int64
		go func() {
			defer close(stopped)
			for {
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
				if _, err := c.Insert(ctx, sqliteJob{}, &river.InsertOpts{Queue: "w-a"}); err != nil {
					t.Errorf("insert beside the catalog: %v", err)
					return
				}
				inserted.Add(1)
				mine.Add(1)
			}
		}()
		t.Cleanup(func() {
			close(stop)
			<-stopped
			// Every job inserted on this file runs, the last ones after
			// the suite's test let go of the catalog.
			for n := int64(0); n < mine.Load(); n++ {
				select {
				case <-started:
					ran.Add(1)
				case <-time.After(10 * time.Second):
					t.Errorf("%d of %d River jobs did not run beside the catalog", mine.Load()-n, mine.Load())
					n = mine.Load()
				}
			}
			if err := c.Stop(ctx); err != nil {
				t.Error(err)
			}
			if errs.Load() != 0 {
				t.Errorf("%d River jobs failed beside the catalog", errs.Load())
			}
		})
		return func(ctx context.Context) (catalog.Catalog, error) {
			return sqlite.Open(ctx, path, sqlite.Options{})
		}
	})
	t.Logf("River jobs beside the suite: %d inserted, %d ran", inserted.Load(), ran.Load())
	if ran.Load() == 0 {
		t.Fatal("no River job ran beside the catalog")
	}
	if ran.Load() != inserted.Load() {
		t.Fatalf("%d of %d River jobs ran", ran.Load(), inserted.Load())
	}
}
