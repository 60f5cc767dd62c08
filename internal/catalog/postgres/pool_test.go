package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog/postgres"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestAStoppedTransactionEndsAndFreesItsLocks: a session that stops inside
// a transaction holding a row's lock (its process frozen) is ended by
// PostgreSQL, so another session's write of that row goes through instead
// of waiting for as long as the first stays stopped. The DSN's own
// setting (1 s here, to keep the test short) is kept; without one the
// pool sets coffer's.
func TestAStoppedTransactionEndsAndFreesItsLocks(t *testing.T) {
	ctx := context.Background()
	dsn := freshSchema(t, testutil.StartPostgres(t))
	plain, err := postgres.NewPool(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	var timeout string
	if err := plain.QueryRow(ctx, "SHOW idle_in_transaction_session_timeout").Scan(&timeout); err != nil {
		t.Fatal(err)
	}
	if timeout != "10s" {
		t.Errorf("a pool's idle_in_transaction_session_timeout is %q, want coffer's 10s", timeout)
	}
	if _, err := plain.Exec(ctx, "CREATE TABLE counter (id int PRIMARY KEY, n int); INSERT INTO counter VALUES (1, 0)"); err != nil {
		t.Fatal(err)
	}

	short, err := postgres.NewPool(ctx, dsn+"&idle_in_transaction_session_timeout=1s")
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	stopped, err := short.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stopped.Exec(ctx, "UPDATE counter SET n = n + 1 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	// stopped now holds the row's lock and does nothing more, as a frozen
	// process would.
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	start := time.Now()
	if _, err := plain.Exec(wctx, "UPDATE counter SET n = n + 10 WHERE id = 1"); err != nil {
		t.Fatalf("a write of the row a stopped transaction locks: %v", err)
	}
	t.Logf("the stopped transaction's lock was freed after %s", time.Since(start).Round(time.Millisecond))
	if err := stopped.Commit(ctx); err == nil {
		t.Error("the stopped transaction committed after PostgreSQL ended its session")
	}
	var n int
	if err := plain.QueryRow(ctx, "SELECT n FROM counter WHERE id = 1").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 10 {
		t.Errorf("the counter is %d, want 10: the stopped transaction's write must be rolled back", n)
	}
}
