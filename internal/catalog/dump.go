package catalog

import (
	"context"
	"errors"
)

// ErrNotEmpty refuses to import over a catalog that already holds state
// (users, configuration objects, audit records...) unless forced.
var ErrNotEmpty = errors.New("catalog: not empty")

// Dumper copies whole tables out of a catalog and into another, column by
// column as the schema has them, so that a column or a table added by a
// migration comes along without code of its own. The SQL catalogs have
// one (internal/catalog/sqlcat/sqldump).
//
// Values cross between databases in one form: nil, int64 (integers,
// booleans as 0 or 1, times as microseconds since the Unix epoch, UTC),
// float64, and string (text, JSON as its text). Load converts them to the
// column types of the catalog it writes.
type Dumper interface {
	// SchemaTables lists the tables of the catalog's schema.
	SchemaTables(ctx context.Context) ([]string, error)
	// SchemaVersion is the newest migration applied.
	SchemaVersion(ctx context.Context) (int, error)
	// Dump reads tables, in this order, inside one read transaction: one
	// consistent snapshot of the catalog, whatever is written meanwhile.
	// It reports the schema version the snapshot has.
	Dump(ctx context.Context, tables []string, w DumpWriter) (schema int, err error)
	// Load empties tables (in reverse order) and inserts the rows of the
	// dump open returns, in one write transaction: on any error nothing
	// changes. The dump may bring only tables listed. Unless replace is
	// set it refuses, with ErrNotEmpty, a catalog whose tables hold rows
	// other than their seeds. open is called again if the transaction
	// is retried.
	Load(ctx context.Context, tables []string, open func() (DumpReader, error), replace bool) error
}

// DumpWriter receives a dump: Table announces the next table and its
// columns, Row each of its rows (the slice is reused after Row returns).
type DumpWriter interface {
	Table(name string, columns []string) error
	Row(values []any) error
}

// DumpReader gives back what a DumpWriter received.
type DumpReader interface {
	// NextTable moves to the next table: its name and columns, or
	// io.EOF after the last.
	NextTable() (name string, columns []string, err error)
	// NextRow returns the next row of the current table, or nil at its
	// end. The values are those the writer received, integers as int64
	// or json.Number.
	NextRow() ([]any, error)
}

// BeforeMigrate is told, before a catalog that holds a schema is migrated
// (from its version to the newest), the catalog as it is: an error leaves
// it unmigrated. (coffer exports its state into the repository there.)
type BeforeMigrate func(ctx context.Context, d Dumper, from, to int) error
