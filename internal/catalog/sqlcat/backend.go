// Package sqlcat implements catalog.Catalog once, in SQL that SQLite and
// PostgreSQL both accept, over a small Backend that each driver provides
// (connections, transactions, batching, error translation). The drivers
// differ only where the databases do: column types in their migrations,
// placeholders, how timestamps are bound, and how writers are serialised.
package sqlcat

import (
	"context"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat/sqlq"
	"strconv"
	"strings"
	"time"
)

// Backend is what a database driver provides.
type Backend interface {
	Dialect() Dialect
	// Query runs a read outside any write transaction.
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	// Write runs fn in one write transaction and commits it. fn may run
	// more than once (a driver retries serialisation failures), so it must
	// only touch the database and values it recomputes.
	Write(ctx context.Context, fn func(Tx) error) error
	// Snapshot runs fn in one read-only transaction that sees the
	// database as it was when it began, whatever commits meanwhile
	// (SQLite: a deferred transaction on a WAL reader; PostgreSQL:
	// REPEATABLE READ). fn may take its time: the transaction is exempt
	// from the idle timeout of coffer's sessions.
	Snapshot(ctx context.Context, fn func(Reader) error) error
	Close() error
}

// Reader runs queries: a snapshot, or a write transaction.
type Reader interface {
	Query(ctx context.Context, query string, args ...any) (Rows, error)
}

// Tx is a write transaction.
type Tx interface {
	// Exec runs one statement and returns the number of rows it changed.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	// ExecBatch runs one statement once per argument row (prepared once,
	// or pipelined) and returns the rows changed by each.
	ExecBatch(ctx context.Context, query string, rows [][]any) ([]int64, error)
	// InsertBatch runs an INSERT ... RETURNING id once per argument row
	// and returns the IDs in order.
	InsertBatch(ctx context.Context, query string, rows [][]any) ([]int64, error)
	// BulkInsert appends rows to table by the fastest means the database
	// has (COPY on PostgreSQL); insert is the equivalent INSERT statement
	// for databases without one.
	BulkInsert(ctx context.Context, table string, columns []string, insert string, rows [][]any) error
}

// Rows is a result set (sqlq.Rows, shared with sqlcat's subpackages).
type Rows = sqlq.Rows

// Dialect describes how a database differs from the SQL written here.
type Dialect struct {
	Name string
	// DollarPlaceholders selects $1, $2... instead of ?.
	DollarPlaceholders bool
	// BindTime converts a non-zero UTC timestamp into a query argument.
	BindTime func(time.Time) any
	// Lock takes a transaction-scoped lock named key, shared or exclusive,
	// so writers in other processes that take the same lock are ordered.
	// Databases with a single writer at a time leave it nil.
	Lock func(ctx context.Context, tx Tx, key string, exclusive bool) error
	// Arrays: a []string argument binds as a text[], and the database
	// has unnest and LATERAL joins (PostgreSQL, which also runs a
	// prepared statement with a generic plan after five runs, so a
	// statement must be fast whatever its arguments).
	Arrays bool
	// JSONText is an expression of the text of key in the JSON object in
	// column (NULL when the column is NULL or lacks the key).
	JSONText func(column, key string) string
	// IsForeignKeyViolation recognises a reference to a missing row.
	IsForeignKeyViolation func(error) bool
	// Notify queues payload for the listeners of other processes,
	// delivered when tx commits (PostgreSQL's NOTIFY): to those of lines
	// when lines (a notice of a job's log or progress,
	// catalog.LineNotice), to the others' otherwise. Databases that cannot
	// push changes leave it nil.
	Notify func(ctx context.Context, tx Tx, payload string, lines bool) error
}

// Listener is implemented by backends whose Dialect has Notify: Listen
// delivers the payloads other transactions notified (of lines, or the
// others), once committed, until ctx ends. An empty payload means some
// may have been lost (the connection was re-established, or the reader
// fell behind); a listener of lines delivers one first, once listening
// holds.
type Listener interface {
	Listen(ctx context.Context, lines bool) (<-chan string, error)
}

// Rebind rewrites ? placeholders for the dialect. The SQL in this package
// never contains a literal question mark.
func (d Dialect) Rebind(q string) string {
	if !d.DollarPlaceholders {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (d Dialect) lock(ctx context.Context, tx Tx, key string, exclusive bool) error {
	if d.Lock == nil {
		return nil
	}
	return d.Lock(ctx, tx, key, exclusive)
}
