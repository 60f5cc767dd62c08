package catalogexport_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogexport"
	"github.com/coffer-backup/coffer/internal/catalog/catalogtest"
	"github.com/coffer-backup/coffer/internal/catalog/postgres"
	"github.com/coffer-backup/coffer/internal/catalog/sqlite"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// exported makes a catalog with rows in every exported table and its
// export, in parts of 300 bytes.
func exported(t *testing.T) (*repotest.Local, catalogexport.Manifest) {
	t.Helper()
	src := newSQLite(t)
	catalogtest.Populate(t, src)
	l := repotest.NewLocal(t, repo.InitOptions{})
	m, err := catalogexport.Export(context.Background(), catalogtest.Dumper(t, src), l.R, catalogexport.Options{History: true, PartSize: 300})
	if err != nil {
		t.Fatal(err)
	}
	return l, m
}

// A broken export (a part altered, cut short or gone) imports nothing
// and the catalog keeps its rows, forced or not; the error names the part.
func TestBrokenExportImportsNothing(t *testing.T) {
	ctx := context.Background()
	l, m := exported(t)
	dst := newSQLite(t)
	if err := dst.AppendAudit(ctx, []catalog.AuditRecord{{Operation: "login", Result: catalog.AuditOK, User: "bob"}}); err != nil {
		t.Fatal(err)
	}
	tables := catalog.ExportedTables(true)
	before := dump(t, dst, tables)
	part := "catalog-exports/" + m.ID + "/" + m.Parts[2].Name
	damages := []struct {
		name   string
		damage func()
	}{
		{"flipped", func() { l.Flip(t, part, 40) }},
		{"cut short", func() { l.Truncate(t, part, 20) }},
		{"gone", func() { l.Remove(t, part) }},
	}
	for _, d := range damages {
		saved := l.Read(t, part)
		d.damage()
		_, err := catalogexport.Import(ctx, catalogtest.Dumper(t, dst), l.R, catalogexport.ImportOptions{ID: m.ID, Force: true})
		if err == nil || !strings.Contains(err.Error(), m.Parts[2].Name) {
			t.Fatalf("import of an export whose part is %s: %v, want an error naming %s", d.name, err, m.Parts[2].Name)
		}
		if got := dump(t, dst, tables); !reflect.DeepEqual(got, before) {
			t.Fatalf("catalog changed by the import of an export whose part is %s", d.name)
		}
		l.Restore(t, part, saved)
	}
	if _, err := catalogexport.Import(ctx, catalogtest.Dumper(t, dst), l.R, catalogexport.ImportOptions{ID: m.ID}); !errors.Is(err, catalog.ErrNotEmpty) {
		t.Fatalf("import over a catalog with an audit record: %v, want ErrNotEmpty", err)
	}
	if _, err := catalogexport.Import(ctx, catalogtest.Dumper(t, dst), l.R, catalogexport.ImportOptions{ID: m.ID, Force: true}); err != nil {
		t.Fatalf("forced import of the export repaired: %v", err)
	}
}

// Export IDs: a malformed one is refused as such, an unknown one is not
// found.
func TestExportIDs(t *testing.T) {
	ctx := context.Background()
	l, m := exported(t)
	for _, id := range []string{"", "../manifest", "20261207T051500Z-0123ABCD", "latest"} {
		if _, err := catalogexport.Get(ctx, l.R, id); !errors.Is(err, catalogexport.ErrInvalidID) {
			t.Errorf("export %q: %v, want ErrInvalidID", id, err)
		}
	}
	if _, err := catalogexport.Get(ctx, l.R, "20200101T000000Z-00000000"); !errors.Is(err, catalogexport.ErrNotFound) {
		t.Errorf("unknown export: %v, want ErrNotFound", err)
	}
	if got, err := catalogexport.Get(ctx, l.R, m.ID); err != nil || !reflect.DeepEqual(got, m) {
		t.Errorf("export %s: %+v, %v", m.ID, got, err)
	}
}

// The objects of an export are sealed: no password hash, token hash or
// audit line appears in the repository's bytes.
func TestExportIsSealed(t *testing.T) {
	l, m := exported(t)
	n := 0
	for name, b := range l.Files(t) {
		if !strings.HasPrefix(name, "catalog-exports/"+m.ID+"/") {
			continue
		}
		n++
		for _, secret := range []string{"argon2id", "alice", "nightly"} {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds %q in clear", name, secret)
			}
		}
	}
	if n != len(m.Parts)+1 {
		t.Fatalf("%d objects of export %s in the repository, want its %d parts and its manifest", n, m.ID, len(m.Parts))
	}
}

// After an import the fresh host has every index the catalog's schema
// makes, defined as before (on SQLite the import drops a table's indexes
// for the load and builds them again after it), and a broken export that
// imports nothing leaves them too. On SQLite and on PostgreSQL.
func TestImportKeepsTheIndexes(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "catalog.db")
	lite, err := sqlite.Open(ctx, file, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lite.Close() })
	importKeepsIndexes(t, lite, func() []string { return indexes(t, file) })

	server := testutil.StartPostgres(t)
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx) })
	schema := fmt.Sprintf("idx%d", schemaSeq.Add(1))
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	pg, err := postgres.Open(ctx, server+"&search_path="+schema, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Close() })
	importKeepsIndexes(t, pg, func() []string {
		rows, err := conn.Query(ctx, `SELECT indexname || ': ' || indexdef FROM pg_indexes WHERE schemaname = $1 ORDER BY indexname`, schema)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	})
}

func importKeepsIndexes(t *testing.T, dst catalog.Catalog, list func() []string) {
	t.Helper()
	ctx := context.Background()
	l, m := exported(t)
	want := list()
	if len(want) == 0 {
		t.Fatal("the catalog's schema has no index to check")
	}
	part := "catalog-exports/" + m.ID + "/" + m.Parts[len(m.Parts)-1].Name
	saved := l.Read(t, part)
	l.Truncate(t, part, 20)
	if _, err := catalogexport.Import(ctx, catalogtest.Dumper(t, dst), l.R, catalogexport.ImportOptions{ID: m.ID}); err == nil {
		t.Fatal("a broken export imported")
	}
	if got := list(); !reflect.DeepEqual(got, want) {
		t.Fatalf("indexes after a broken import:\n%v\nwant\n%v", got, want)
	}
	l.Restore(t, part, saved)
	if _, err := catalogexport.Import(ctx, catalogtest.Dumper(t, dst), l.R, catalogexport.ImportOptions{ID: m.ID}); err != nil {
		t.Fatal(err)
	}
	if got := list(); !reflect.DeepEqual(got, want) {
		t.Fatalf("indexes after the import:\n%v\nwant\n%v", got, want)
	}
}

// indexes lists a SQLite file's indexes with their definitions.
func indexes(t *testing.T, file string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", file)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT name, COALESCE(sql, '') FROM sqlite_master WHERE type = 'index' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n, d string
		if err := rows.Scan(&n, &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, n+": "+d)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
