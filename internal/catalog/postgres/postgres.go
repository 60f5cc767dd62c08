// Package postgres is the scale-out catalog: a PostgreSQL database that
// several coffer workers share (pgx/v5 pool).
//
// Changes to jobs are announced with NOTIFY (see listen.go), so other
// processes follow running jobs without polling.
//
// Concurrency: transactions run at READ COMMITTED. Rows are always written
// in key order so that writers cannot deadlock; a replace of a
// repository's backup points holds an exclusive advisory lock on that
// repository, upserts and deletes a shared one, so a replace is atomic
// with respect to other writers as well as readers; migrations run under
// an exclusive advisory lock, so workers starting together migrate once.
// A transaction that still fails with a serialisation failure or deadlock
// is retried with backoff.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat/sqldump"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the schema migrations of this driver.
func Migrations() ([]sqlcat.Migration, error) {
	all, err := sqlcat.LoadMigrations(migrationFiles, "migrations")
	if err != nil || !NextReleaseForTests {
		return all, err
	}
	return append(all, sqlcat.Migration{Version: len(all) + 1, Name: "test_next_release",
		SQL: "CREATE TABLE test_next_release (id INTEGER)"}), nil
}

// NextReleaseForTests, set by coffer's test binaries only
// (internal/cli/clitest, from COFFER_TEST_NEXT_SCHEMA), makes this build
// know one migration more than it ships, as the next release would: a
// rolling upgrade's test whose previous build has the same schema as
// this one runs this build as both.
var NextReleaseForTests bool

// Options tune an open catalog.
type Options struct {
	// MaxConns bounds the pool (default: pgxpool's, max(4, CPUs)).
	MaxConns int32
	// BeforeMigrate, when set, runs before a database that holds a
	// schema is migrated.
	BeforeMigrate catalog.BeforeMigrate
}

// connect opens a pool of connections to the database named by dsn.
func connect(ctx context.Context, dsn string, o Options) (*backend, error) {
	cfg, err := PoolConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	return &backend{pool: pool}, nil
}

// Open connects to the database named by dsn (postgres://... or a
// key=value string) and migrates it.
func Open(ctx context.Context, dsn string, o Options) (catalog.Catalog, error) {
	b, err := connect(ctx, dsn, o)
	if err != nil {
		return nil, err
	}
	migrations, err := Migrations()
	if err == nil {
		var before sqlcat.BeforeMigrate
		if o.BeforeMigrate != nil {
			before = func(ctx context.Context, from, to int) error { return o.BeforeMigrate(ctx, sqldump.New(b), from, to) }
		}
		_, err = sqlcat.MigrateAfter(ctx, b, migrations, before)
	}
	if err != nil {
		b.pool.Close()
		c := b.pool.Config().ConnConfig
		return nil, fmt.Errorf("%w (catalog on %s:%d)", err, c.Host, c.Port)
	}
	return newCatalog(b), nil
}

type backend struct{ pool *pgxpool.Pool }

func (b *backend) Dialect() sqlcat.Dialect {
	return sqlcat.Dialect{
		Arrays:                true,
		Name:                  "postgres",
		DollarPlaceholders:    true,
		BindTime:              func(t time.Time) any { return t },
		JSONText:              func(column, key string) string { return column + "->>'" + key + "'" },
		Lock:                  advisoryLock,
		Notify:                notify,
		IsForeignKeyViolation: isForeignKeyViolation,
	}
}

func isForeignKeyViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23503"
}

// advisoryLock takes a transaction-scoped advisory lock on a 64-bit hash
// of key.
func advisoryLock(ctx context.Context, tx sqlcat.Tx, key string, exclusive bool) error {
	q := `SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0))`
	if exclusive {
		q = `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`
	}
	_, err := tx.Exec(ctx, q, key)
	return err
}

func (b *backend) Query(ctx context.Context, q string, args ...any) (sqlcat.Rows, error) {
	return b.pool.Query(ctx, q, args...)
}

const maxAttempts = 6

func (b *backend) Write(ctx context.Context, fn func(sqlcat.Tx) error) error {
	return retry(ctx, func() error {
		return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error { return fn(pgTx{tx}) })
	})
}

// writeStatement runs q as a transaction of its own (autocommit: one
// round trip), retried as Write's are.
func (b *backend) writeStatement(ctx context.Context, q string, args []any, scan func(sqlcat.Rows) error) error {
	return retry(ctx, func() error {
		rows, err := b.pool.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := scan(rows); err != nil {
				return err
			}
		}
		return rows.Err()
	})
}

// retry runs a write again after a serialisation failure or deadlock,
// up to maxAttempts times.
func retry(ctx context.Context, write func() error) error {
	for attempt := 1; ; attempt++ {
		err := write()
		if err == nil || !retryable(err) || attempt == maxAttempts {
			return err
		}
		// Jittered exponential backoff: 5, 10, 20... ms.
		d := time.Duration(5<<(attempt-1)) * time.Millisecond
		d += rand.N(d)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(d):
		}
	}
}

// retryable recognises serialisation failures and deadlocks: the
// transaction was rolled back and can simply run again.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

func (b *backend) Close() error {
	b.pool.Close()
	return nil
}

// pgTx adapts pgx.Tx; batches are pipelined in one round trip.
type pgTx struct{ tx pgx.Tx }

func (t pgTx) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := t.tx.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

func (t pgTx) Query(ctx context.Context, q string, args ...any) (sqlcat.Rows, error) {
	return t.tx.Query(ctx, q, args...)
}

func (t pgTx) ExecBatch(ctx context.Context, q string, rows [][]any) ([]int64, error) {
	b := &pgx.Batch{}
	for _, args := range rows {
		b.Queue(q, args...)
	}
	br := t.tx.SendBatch(ctx, b)
	out := make([]int64, len(rows))
	for i := range rows {
		tag, err := br.Exec()
		if err != nil {
			_ = br.Close()
			return nil, err
		}
		out[i] = tag.RowsAffected()
	}
	return out, br.Close()
}

func (t pgTx) BulkInsert(ctx context.Context, table string, columns []string, _ string, rows [][]any) error {
	_, err := t.tx.CopyFrom(ctx, pgx.Identifier{table}, columns, pgx.CopyFromRows(rows))
	return err
}

func (t pgTx) InsertBatch(ctx context.Context, q string, rows [][]any) ([]int64, error) {
	b := &pgx.Batch{}
	for _, args := range rows {
		b.Queue(q, args...)
	}
	br := t.tx.SendBatch(ctx, b)
	out := make([]int64, len(rows))
	for i := range rows {
		if err := br.QueryRow().Scan(&out[i]); err != nil {
			_ = br.Close()
			return nil, err
		}
	}
	return out, br.Close()
}
