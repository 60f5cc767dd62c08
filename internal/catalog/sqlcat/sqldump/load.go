package sqldump

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat/sqlq"
)

// loadBatch is how many rows go to the database at once: enough that a
// round trip costs nothing next to them, few enough to bound memory.
const loadBatch = 2000

// Load replaces the rows of the tables the dump brings, in one write
// transaction. open is called again when the transaction is retried.
func (c *Dumper) Load(ctx context.Context, tables []string, open func() (catalog.DumpReader, error), replace bool) error {
	err := c.b.Write(ctx, func(tx sqlcat.Tx) error {
		if !replace {
			if err := c.checkEmpty(ctx, tx, tables); err != nil {
				return err
			}
		}
		for _, t := range slices.Backward(tables) {
			if _, err := tx.Exec(ctx, "DELETE FROM "+quoteIdent(t)); err != nil {
				return fmt.Errorf("table %s: %w", t, err)
			}
		}
		r, err := open()
		if err != nil {
			return err
		}
		return c.loadTables(ctx, tx, tables, r)
	})
	if err != nil {
		return fmt.Errorf("catalog: load: %w", err)
	}
	return nil
}

// checkEmpty refuses a catalog that holds rows in one of tables, seeds
// apart.
func (c *Dumper) checkEmpty(ctx context.Context, tx sqlcat.Tx, tables []string) error {
	for _, t := range tables {
		if d, ok := catalog.Table(t); ok && d.Seeded {
			continue
		}
		held := false
		err := sqlq.Each(ctx, tx, "SELECT 1 FROM "+quoteIdent(t)+" LIMIT 1", nil, func(sqlcat.Rows) error {
			held = true
			return nil
		})
		if err != nil {
			return fmt.Errorf("table %s: %w", t, err)
		}
		if held {
			return fmt.Errorf("%w: table %s holds rows", catalog.ErrNotEmpty, t)
		}
	}
	return nil
}

func (c *Dumper) loadTables(ctx context.Context, tx sqlcat.Tx, tables []string, r catalog.DumpReader) error {
	for {
		table, cols, err := r.NextTable()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if !slices.Contains(tables, table) {
			return fmt.Errorf("the dump brings table %s, which is not to be loaded", table)
		}
		if err := c.loadTable(ctx, tx, table, cols, r); err != nil {
			return fmt.Errorf("table %s: %w", table, err)
		}
	}
}

func (c *Dumper) loadTable(ctx context.Context, tx sqlcat.Tx, table string, names []string, r catalog.DumpReader) error {
	schema, err := c.columns(ctx, tx, table)
	if err != nil {
		return err
	}
	kinds := make([]columnKind, len(names))
	quoted := make([]string, len(names))
	for i, n := range names {
		j := slices.IndexFunc(schema, func(col column) bool { return col.name == n })
		if j < 0 {
			return fmt.Errorf("this catalog has no column %s", n)
		}
		kinds[i], quoted[i] = schema[j].kind, quoteIdent(n)
	}
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(names)), ", ")
	insert := c.d.Rebind("INSERT INTO " + quoteIdent(table) + " (" + strings.Join(quoted, ", ") + ") VALUES (" + marks + ")")
	var batch [][]any
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := tx.BulkInsert(ctx, table, names, insert, batch)
		batch = batch[:0]
		return err
	}
	rebuild, err := c.dropIndexes(ctx, tx, table)
	if err != nil {
		return err
	}
	for {
		row, err := r.NextRow()
		if err != nil {
			return err
		}
		if row == nil {
			break
		}
		if len(row) != len(names) {
			return fmt.Errorf("a row of %d values for %d columns", len(row), len(names))
		}
		args := make([]any, len(row))
		for i, v := range row {
			if args[i], err = c.bindable(v, kinds[i]); err != nil {
				return fmt.Errorf("column %s: %w", names[i], err)
			}
		}
		if batch = append(batch, args); len(batch) == loadBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if err := rebuild(); err != nil {
		return err
	}
	return c.restartIdentity(ctx, tx, table)
}

// dropIndexes drops a SQLite table's own indexes (not those of its
// constraints, which cannot be dropped) for the load, and returns what
// makes them again, in the same transaction: SQLite then builds each
// index once from the loaded rows instead of inserting every row into
// it, where it spent a third of a 340,000-row load. A failed load rolls
// the drop back with everything else, and readers keep seeing the
// committed catalog meanwhile. Not on PostgreSQL: DROP INDEX locks the
// table against readers until the import commits, and an import through
// the API runs beside the server's other requests (a quarter off a
// tenth-scale import was measured; docs/benchmarks.md).
func (c *Dumper) dropIndexes(ctx context.Context, tx sqlcat.Tx, table string) (rebuild func() error, err error) {
	if c.d.Name == "postgres" {
		return func() error { return nil }, nil
	}
	q := `SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL ORDER BY name`
	var names, defs []string
	err = sqlq.Each(ctx, tx, q,
		[]any{table}, func(rows sqlcat.Rows) error {
			var n, d string
			err := rows.Scan(&n, &d)
			names, defs = append(names, n), append(defs, d)
			return err
		})
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if _, err := tx.Exec(ctx, "DROP INDEX "+quoteIdent(n)); err != nil {
			return nil, fmt.Errorf("drop index %s for the load: %w", n, err)
		}
	}
	return func() error {
		for i, d := range defs {
			if _, err := tx.Exec(ctx, d); err != nil {
				return fmt.Errorf("build index %s again: %w", names[i], err)
			}
		}
		return nil
	}, nil
}

// restartIdentity sets a PostgreSQL identity column's sequence past the
// rows loaded, so that the next row inserted gets a new ID. (SQLite's
// AUTOINCREMENT follows the largest ID inserted by itself.)
func (c *Dumper) restartIdentity(ctx context.Context, tx sqlcat.Tx, table string) error {
	if c.d.Name != "postgres" {
		return nil
	}
	var idCols []string
	err := sqlq.Each(ctx, tx, `SELECT column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = $1 AND is_identity = 'YES'`, []any{table}, func(rows sqlcat.Rows) error {
		var n string
		err := rows.Scan(&n)
		idCols = append(idCols, n)
		return err
	})
	if err != nil {
		return err
	}
	for _, col := range idCols {
		q := fmt.Sprintf(`SELECT setval(pg_get_serial_sequence($1, $2), COALESCE(MAX(%[1]s), 0) + 1, false) FROM %[2]s`,
			quoteIdent(col), quoteIdent(table))
		if _, err := tx.Exec(ctx, q, table, col); err != nil {
			return fmt.Errorf("restart the identity of %s: %w", col, err)
		}
	}
	return nil
}
