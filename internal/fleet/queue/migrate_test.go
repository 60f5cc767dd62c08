package queue_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/coffer-backup/coffer/internal/fleet/queue"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestMigrateConcurrently: processes starting at once (a pool each)
// migrate River's schema once between them, and none fails.
func TestMigrateConcurrently(t *testing.T) {
	dsn := testutil.StartPostgres(t)
	ctx := context.Background()
	const starters = 4
	applied := make([][]int, starters)
	var g errgroup.Group
	for i := range starters {
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		g.Go(func() (err error) {
			applied[i], err = queue.Migrate(ctx, pool)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	migrated := 0
	for _, a := range applied {
		if len(a) > 0 {
			migrated++
		}
	}
	if migrated != 1 {
		t.Fatalf("%d processes applied River's migrations: %v", migrated, applied)
	}
	t.Logf("versions applied: %v", applied)
}
