package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"

	"github.com/coffer-backup/coffer/internal/catalog/sqlcat"
)

// Snapshot runs fn in a deferred transaction on a reader's connection:
// in WAL mode it sees the database as of its first read, and neither
// blocks the writer nor is blocked by it. (The readers' BeginTx would
// say BEGIN IMMEDIATE, the writers' lock, which a query-only connection
// may not take: the transaction is begun and ended by hand.)
func (b *backend) Snapshot(ctx context.Context, fn func(sqlcat.Reader) error) error {
	conn, err := b.read.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	if _, err := conn.ExecContext(ctx, "BEGIN DEFERRED"); err != nil {
		return err
	}
	err = fn(connReader{conn})
	// Ended whatever ctx says; a connection left inside the transaction
	// is discarded rather than handed to the next reader.
	if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		err = errors.Join(err, rerr)
	}
	return err
}

type connReader struct{ conn *sql.Conn }

func (r connReader) Query(ctx context.Context, q string, args ...any) (sqlcat.Rows, error) {
	rows, err := r.conn.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}
