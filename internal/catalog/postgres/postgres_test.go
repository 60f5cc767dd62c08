package postgres_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogtest"
	"github.com/coffer-backup/coffer/internal/catalog/postgres"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// freshSchema creates an empty schema on the server and returns a DSN
// whose search_path points at it: each test gets a database of its own
// without the cost of CREATE DATABASE.
func freshSchema(t testing.TB, serverDSN string) string {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("t%d", schemaSeq.Add(1))
	conn, err := pgx.Connect(ctx, serverDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	return serverDSN + "&search_path=" + name
}

var schemaSeq atomic.Int64

func TestConformance(t *testing.T) {
	server := testutil.StartPostgres(t)
	catalogtest.Run(t, func(t *testing.T) catalogtest.Opener {
		dsn := freshSchema(t, server)
		return func(ctx context.Context) (catalog.Catalog, error) {
			return postgres.Open(ctx, dsn, postgres.Options{})
		}
	})
}

// A catalog written by a coffer with schema version 1 is migrated in
// place: its rows keep their values and gain empty snapshot modes.
func TestUpgradeFromVersion1(t *testing.T) {
	ctx := context.Background()
	dsn := freshSchema(t, testutil.StartPostgres(t))
	ms, err := postgres.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The rows catalogtest.CheckUpgradeFromV1 expects.
	for _, q := range []string{
		`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`,
		ms[0].SQL,
		`INSERT INTO schema_migrations VALUES (1, 'init', '')`,
		`INSERT INTO jobs (id, kind, created_at) VALUES (1, 'backup', now())`,
		`INSERT INTO tasks (job_id, vm_name, status, snapshot_mode, backup_point_id) VALUES (1, 'web', 'success', 'quiesced', 'old')`,
		`INSERT INTO backup_points (repository, id, taken_at, vm_name, mode) VALUES ('r', 'old', now(), 'web', 'full')`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%v: %s", err, q)
		}
	}
	c, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	catalogtest.CheckUpgradeFromV1(t, c)
}

// go test -run '^$' -bench Writes -benchtime 1x ./internal/catalog/postgres/
func BenchmarkWrites(b *testing.B) {
	dsn := freshSchema(b, testutil.StartPostgres(b))
	catalogtest.BenchmarkWrites(b, func(ctx context.Context) (catalog.Catalog, error) {
		return postgres.Open(ctx, dsn, postgres.Options{})
	})
}
