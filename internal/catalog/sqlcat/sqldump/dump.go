// Package sqldump copies whole tables out of an SQL catalog and into
// another (catalog.Dumper), by the columns the schema declares: a column
// or a table added by a migration comes along without a line of code
// here. Values cross in one form whatever the database (see
// catalog.Dumper); the column's type in the catalog that loads them says
// what each becomes.
package sqldump

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat/sqlq"
)

// Dumper is catalog.Dumper over an SQL catalog's backend.
type Dumper struct {
	b sqlcat.Backend
	d sqlcat.Dialect
}

var _ catalog.Dumper = (*Dumper)(nil)

// New dumps and loads the catalog of backend b.
func New(b sqlcat.Backend) *Dumper { return &Dumper{b: b, d: b.Dialect()} }

// Of is the Dumper of catalog c: an SQL catalog, or one that wraps it
// (Unwrap); false for any other.
func Of(c catalog.Catalog) (*Dumper, bool) {
	for {
		if sc, ok := c.(interface{ Backend() sqlcat.Backend }); ok {
			return New(sc.Backend()), true
		}
		u, ok := c.(interface{ Unwrap() catalog.Catalog })
		if !ok {
			return nil, false
		}
		c = u.Unwrap()
	}
}

// column is a table's column as the schema declares it.
type column struct {
	name string
	kind columnKind
}

type columnKind int

const (
	kindOther columnKind = iota // text and whatever reads back as itself
	kindInt
	kindFloat
	kindBool // PostgreSQL boolean; SQLite keeps 0 and 1 in INTEGER
	kindTime // PostgreSQL timestamptz; SQLite keeps microseconds in INTEGER
	kindJSON // PostgreSQL jsonb; SQLite keeps its text
)

func kindOf(declared string) columnKind {
	switch t := strings.ToLower(declared); {
	case t == "integer" || t == "bigint" || t == "smallint" || t == "int":
		return kindInt
	case t == "real" || t == "double precision" || t == "double":
		return kindFloat
	case t == "boolean":
		return kindBool
	case strings.HasPrefix(t, "timestamp"):
		return kindTime
	case t == "jsonb" || t == "json":
		return kindJSON
	}
	return kindOther
}

// SchemaTables lists the base tables of the catalog's schema (on
// PostgreSQL, the schema of the search path the catalog was opened with).
func (c *Dumper) SchemaTables(ctx context.Context) ([]string, error) {
	return c.schemaTables(ctx, c.b)
}

func (c *Dumper) schemaTables(ctx context.Context, r sqlcat.Reader) ([]string, error) {
	q := `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY name`
	if c.d.Name == "postgres" {
		q = `SELECT table_name FROM information_schema.tables
			WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`
	}
	var out []string
	err := sqlq.Each(ctx, r, q, nil, func(rows sqlcat.Rows) error {
		var name string
		err := rows.Scan(&name)
		out = append(out, name)
		return err
	})
	return out, err
}

// SchemaVersion is the newest migration applied.
func (c *Dumper) SchemaVersion(ctx context.Context) (int, error) {
	return sqlcat.SchemaVersion(ctx, c.b)
}

// columns lists a table's columns in their order; none for a table the
// schema lacks.
func (c *Dumper) columns(ctx context.Context, r sqlcat.Reader, table string) ([]column, error) {
	q := `SELECT name, type FROM pragma_table_info(?) ORDER BY cid`
	if c.d.Name == "postgres" {
		q = `SELECT column_name, data_type FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position`
	}
	var out []column
	err := sqlq.Each(ctx, r, c.d.Rebind(q), []any{table}, func(rows sqlcat.Rows) error {
		var name, typ string
		err := rows.Scan(&name, &typ)
		out = append(out, column{name: name, kind: kindOf(typ)})
		return err
	})
	return out, err
}

func quoteIdent(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// Dump reads the tables in one snapshot (Backend.Snapshot).
func (c *Dumper) Dump(ctx context.Context, tables []string, w catalog.DumpWriter) (int, error) {
	schema := 0
	err := c.b.Snapshot(ctx, func(r sqlcat.Reader) error {
		var err error
		if schema, err = schemaVersionIn(ctx, r); err != nil {
			return err
		}
		for _, t := range tables {
			if err := c.dumpTable(ctx, r, t, w); err != nil {
				return fmt.Errorf("table %s: %w", t, err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("catalog: dump: %w", err)
	}
	return schema, nil
}

func schemaVersionIn(ctx context.Context, r sqlcat.Reader) (int, error) {
	v := 0
	err := sqlq.Each(ctx, r, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`, nil, func(rows sqlcat.Rows) error {
		return rows.Scan(&v)
	})
	return v, err
}

func (c *Dumper) dumpTable(ctx context.Context, r sqlcat.Reader, table string, w catalog.DumpWriter) error {
	cols, err := c.columns(ctx, r, table)
	if err != nil {
		return err
	}
	if len(cols) == 0 {
		return fmt.Errorf("%w: the schema has no such table", catalog.ErrNotFound)
	}
	names := make([]string, len(cols))
	exprs := make([]string, len(cols))
	for i, col := range cols {
		names[i] = col.name
		exprs[i] = quoteIdent(col.name)
		if col.kind == kindJSON {
			exprs[i] += "::text"
		}
	}
	if err := w.Table(table, names); err != nil {
		return err
	}
	// In the order of the first column (the key of most tables), so that
	// two dumps of the same rows are the same.
	q := "SELECT " + strings.Join(exprs, ", ") + " FROM " + quoteIdent(table) + " ORDER BY 1"
	vals := make([]any, len(cols))
	dest := make([]any, len(cols))
	for i := range vals {
		dest[i] = &vals[i]
	}
	return sqlq.Each(ctx, r, q, nil, func(rows sqlcat.Rows) error {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		for i := range vals {
			v, err := portable(vals[i])
			if err != nil {
				return fmt.Errorf("column %s: %w", names[i], err)
			}
			vals[i] = v
		}
		return w.Row(vals)
	})
}

// portable turns a value a driver read into the form dumps carry.
func portable(v any) (any, error) {
	switch x := v.(type) {
	case nil, int64, float64, string:
		return x, nil
	case int32:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int:
		return int64(x), nil
	case float32:
		return float64(x), nil
	case bool:
		if x {
			return int64(1), nil
		}
		return int64(0), nil
	case time.Time:
		return x.UnixMicro(), nil
	case []byte:
		return string(x), nil
	}
	return nil, fmt.Errorf("a value of type %T, which dumps do not carry", v)
}

// bindable turns a dumped value into an argument for a column of kind k.
func (c *Dumper) bindable(v any, k columnKind) (any, error) {
	if n, ok := v.(json.Number); ok {
		if i, err := n.Int64(); err == nil {
			v = i
		} else if f, err := n.Float64(); err == nil {
			v = f
		} else {
			return nil, fmt.Errorf("not a number: %s", n)
		}
	}
	if v == nil {
		return nil, nil
	}
	switch k {
	case kindInt:
		if i, ok := v.(int64); ok {
			return i, nil
		}
	case kindFloat:
		switch x := v.(type) {
		case float64:
			return x, nil
		case int64:
			return float64(x), nil
		}
	case kindBool:
		if i, ok := v.(int64); ok {
			return i != 0, nil
		}
	case kindTime:
		if i, ok := v.(int64); ok {
			return time.UnixMicro(i).UTC(), nil
		}
	case kindJSON, kindOther:
		switch x := v.(type) {
		case string:
			return x, nil
		case int64, float64:
			if c.d.Name != "postgres" { // SQLite's columns take any value
				return x, nil
			}
		}
	}
	return nil, fmt.Errorf("a %T where the column wants %s", v, k)
}

func (k columnKind) String() string {
	return [...]string{"text", "an integer", "a number", "a boolean", "a time", "JSON"}[k]
}
