package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coffer-backup/coffer/internal/catalog/sqlcat"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// A transaction that fails with a serialisation failure or a deadlock is
// run again; any other error is returned at once.
func TestWriteRetriesSerialisationFailures(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testutil.StartPostgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	b := &backend{pool: pool}
	raise := func(tx sqlcat.Tx, code string) error {
		_, err := tx.Exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = '`+code+`'; END $$`)
		return err
	}
	for _, code := range []string{"40001", "40P01"} {
		calls := 0
		err := b.Write(ctx, func(tx sqlcat.Tx) error {
			calls++
			if calls < 3 {
				return raise(tx, code)
			}
			return nil
		})
		if err != nil || calls != 3 {
			t.Fatalf("%s: err %v after %d calls, want success on the third", code, err, calls)
		}
	}
	calls := 0
	err = b.Write(ctx, func(tx sqlcat.Tx) error { calls++; return raise(tx, "23505") })
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23505" || calls != 1 {
		t.Fatalf("unique violation: err %v after %d calls, want it returned at once", err, calls)
	}
	calls = 0
	err = b.Write(ctx, func(tx sqlcat.Tx) error { calls++; return raise(tx, "40001") })
	if !errors.As(err, &pe) || pe.Code != "40001" || calls != maxAttempts {
		t.Fatalf("persistent failure: err %v after %d calls, want %d attempts", err, calls, maxAttempts)
	}
}
