// Package sqlite is the default catalog: one SQLite file, pure Go
// (modernc.org/sqlite), no server.
//
// Concurrency: the database runs in WAL mode, so readers never block the
// writer nor each other. Within a process all writes go through one
// connection; across processes every write transaction starts with BEGIN
// IMMEDIATE, taking SQLite's write lock up front, and waits for it up to
// the busy timeout; opening and migrating a file is serialised by a flock
// on a file beside it (catalog.db-open.lock). A transaction is durable
// when it returns (synchronous=FULL); a process killed mid-transaction
// leaves nothing of it behind.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat/sqldump"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the schema migrations of this driver.
func Migrations() ([]sqlcat.Migration, error) {
	return sqlcat.LoadMigrations(migrationFiles, "migrations")
}

// Memory is the path of a private in-memory catalog (tests, dry runs).
const Memory = ":memory:"

// Options tune an open catalog.
type Options struct {
	// BusyTimeout is how long a writer waits for another process's
	// write transaction (default 30 s).
	BusyTimeout time.Duration
	// ReadConns bounds concurrent readers (default 4).
	ReadConns int
	// BeforeMigrate, when set, runs before a file that holds a schema is
	// migrated (not for an in-memory catalog).
	BeforeMigrate catalog.BeforeMigrate
}

// Open opens (creating if needed) the catalog at path and migrates it.
func Open(ctx context.Context, path string, o Options) (catalog.Catalog, error) {
	unlock, err := lockOpening(path)
	if err != nil {
		return nil, err
	}
	defer unlock()
	b, err := openBackend(path, o)
	if err != nil {
		return nil, err
	}
	migrations, err := Migrations()
	if err == nil {
		var before sqlcat.BeforeMigrate
		if o.BeforeMigrate != nil && path != Memory {
			before = func(ctx context.Context, from, to int) error { return o.BeforeMigrate(ctx, sqldump.New(b), from, to) }
		}
		_, err = sqlcat.MigrateAfter(ctx, b, migrations, before)
	}
	if err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("%w (catalog %s)", err, path)
	}
	return sqlcat.New(b), nil
}

// lockOpening serialises opening the catalog file across processes, held
// until the schema is migrated. Switching a new file to WAL mode takes
// SQLite's exclusive lock and, when another process is doing the same,
// fails with SQLITE_BUSY at once instead of waiting out the busy timeout
// (SQLite skips the busy handler where waiting could deadlock). The lock
// is a flock on a file beside the catalog, so it dies with its process.
func lockOpening(path string) (unlock func(), err error) {
	if path == Memory || path == "" {
		return func() {}, nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	f, err := os.OpenFile(abs+"-open.lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("catalog: lock %s: %w", f.Name(), err)
	}
	return func() { _ = f.Close() }, nil // closing releases the flock
}

type backend struct {
	write *sql.DB // one connection: SQLite has one writer at a time
	read  *sql.DB
}

func openBackend(path string, o Options) (*backend, error) {
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 30 * time.Second
	}
	if o.ReadConns <= 0 {
		o.ReadConns = 4
	}
	params := url.Values{}
	params.Set("_busy_timeout", fmt.Sprint(o.BusyTimeout.Milliseconds()))
	params.Set("_foreign_keys", "1")
	params.Set("_txlock", "immediate")
	if path == Memory {
		// A private in-memory database lives in its connection: readers
		// and the writer must share that one connection.
		db, err := sql.Open("sqlite", ":memory:?"+params.Encode())
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(1)
		db.SetConnMaxIdleTime(0)
		db.SetConnMaxLifetime(0)
		return &backend{write: db, read: db}, nil
	}
	if path == "" {
		return nil, errors.New("catalog: no SQLite path given")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	name := "file:" + (&url.URL{Path: abs}).EscapedPath()
	params.Set("_journal_mode", "WAL")
	params.Set("_synchronous", "FULL")
	w, err := sql.Open("sqlite", name+"?"+params.Encode())
	if err != nil {
		return nil, err
	}
	w.SetMaxOpenConns(1)
	params.Set("_query_only", "1")
	params.Del("_journal_mode") // set once by the writer; it persists in the file
	r, err := sql.Open("sqlite", name+"?"+params.Encode())
	if err != nil {
		_ = w.Close()
		return nil, err
	}
	r.SetMaxOpenConns(o.ReadConns)
	// The writer connects first so that WAL mode is on before any reader
	// looks at the file.
	if err := w.PingContext(context.Background()); err != nil {
		_ = w.Close()
		_ = r.Close()
		return nil, fmt.Errorf("catalog: open %s: %w", abs, err)
	}
	return &backend{write: w, read: r}, nil
}

func (b *backend) Dialect() sqlcat.Dialect {
	return sqlcat.Dialect{
		Name:     "sqlite",
		BindTime: func(t time.Time) any { return t.UnixMicro() },
		JSONText: func(column, key string) string { return "json_extract(" + column + ", '$." + key + "')" },
		IsForeignKeyViolation: func(err error) bool {
			var se *sqlite.Error
			return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
		},
	}
}

func (b *backend) Query(ctx context.Context, q string, args ...any) (sqlcat.Rows, error) {
	rows, err := b.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (b *backend) Write(ctx context.Context, fn func(sqlcat.Tx) error) error {
	tx, err := b.write.BeginTx(ctx, nil) // BEGIN IMMEDIATE (_txlock)
	if err != nil {
		return err
	}
	if err := fn(sqlTx{tx}); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (b *backend) Close() error {
	err := b.read.Close()
	if b.write != b.read {
		err = errors.Join(err, b.write.Close())
	}
	return err
}

// sqlRows adapts *sql.Rows.
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

// sqlTx adapts *sql.Tx.
type sqlTx struct{ tx *sql.Tx }

func (t sqlTx) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := t.tx.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (t sqlTx) Query(ctx context.Context, q string, args ...any) (sqlcat.Rows, error) {
	rows, err := t.tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (t sqlTx) ExecBatch(ctx context.Context, q string, rows [][]any) ([]int64, error) {
	stmt, err := t.tx.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer func() { _ = stmt.Close() }() // the transaction's commit reports what matters
	out := make([]int64, len(rows))
	for i, args := range rows {
		res, err := stmt.ExecContext(ctx, args...)
		if err != nil {
			return nil, err
		}
		if out[i], err = res.RowsAffected(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (t sqlTx) BulkInsert(ctx context.Context, _ string, _ []string, insert string, rows [][]any) error {
	_, err := t.ExecBatch(ctx, insert, rows)
	return err
}

func (t sqlTx) InsertBatch(ctx context.Context, q string, rows [][]any) ([]int64, error) {
	stmt, err := t.tx.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer func() { _ = stmt.Close() }() // the transaction's commit reports what matters
	out := make([]int64, len(rows))
	for i, args := range rows {
		if err := stmt.QueryRowContext(ctx, args...).Scan(&out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}
