// Package sqlq is the statement interface that sqlcat and its
// subpackages share: a result set, something that runs queries, and the
// two single-value reads every one of them needs. It is a leaf, so that
// sqlcat's subpackages take sqlcat's own transactions without importing
// sqlcat.
package sqlq

import "context"

// Rows is a result set; both database/sql and pgx rows fit it through a
// thin adapter.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Querier runs a statement that returns rows.
type Querier interface {
	Query(ctx context.Context, query string, args ...any) (Rows, error)
}

// Execer runs statements of both kinds: a transaction.
type Execer interface {
	Querier
	// Exec runs one statement and returns the number of rows it changed.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
}

// Int reads one integer: -1 when the query returns no row.
func Int(ctx context.Context, q Querier, query string, args ...any) (int64, error) {
	v := int64(-1)
	return v, one(ctx, q, &v, query, args)
}

// String reads one string: "" when the query returns no row.
func String(ctx context.Context, q Querier, query string, args ...any) (string, error) {
	var s string
	return s, one(ctx, q, &s, query, args)
}

func one(ctx context.Context, q Querier, dest any, query string, args []any) error {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if rows.Next() {
		if err := rows.Scan(dest); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Each runs a query and calls scan for every row it returns.
func Each(ctx context.Context, q Querier, query string, args []any, scan func(Rows) error) error {
	rows, err := q.Query(ctx, query, args...)
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
}

// QueryFunc is a function that runs a query, as a Querier.
type QueryFunc func(ctx context.Context, query string, args ...any) (Rows, error)

// Query implements Querier.
func (f QueryFunc) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	return f(ctx, query, args...)
}
