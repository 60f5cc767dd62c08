package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/coffer-backup/coffer/internal/catalog/sqlcat"
)

// Snapshot runs fn in a read-only REPEATABLE READ transaction: every
// query sees the snapshot taken by the first. The session's idle timeout
// (pool.go) is lifted for it: between two tables an export writes to
// the repository, which may take longer than a catalog write waits.
func (b *backend) Snapshot(ctx context.Context, fn func(sqlcat.Reader) error) error {
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	return pgx.BeginTxFunc(ctx, b.pool, opts, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL idle_in_transaction_session_timeout = 0"); err != nil {
			return err
		}
		return fn(pgTx{tx})
	})
}
