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

// go test -run '^$' -bench Writes -benchtime 1x ./internal/catalog/postgres/
func BenchmarkWrites(b *testing.B) {
	dsn := freshSchema(b, testutil.StartPostgres(b))
	catalogtest.BenchmarkWrites(b, func(ctx context.Context) (catalog.Catalog, error) {
		return postgres.Open(ctx, dsn, postgres.Options{})
	})
}
