package catalogexport_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
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

func newSQLite(t *testing.T) catalog.Catalog {
	t.Helper()
	c, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "catalog.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var schemaSeq atomic.Int64

// newPostgres opens a catalog in a new schema of server.
func newPostgres(t *testing.T, server string) catalog.Catalog {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("x%d", schemaSeq.Add(1))
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+name)
	_ = conn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := postgres.Open(ctx, server+"&search_path="+name, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// dump reads tables of c, JSON text in one form: PostgreSQL's jsonb
// spaces what SQLite keeps as written.
func dump(t *testing.T, c catalog.Catalog, tables []string) []catalogtest.DumpTable {
	t.Helper()
	d := &catalogtest.Dump{}
	if _, err := catalogtest.Dumper(t, c).Dump(context.Background(), tables, d); err != nil {
		t.Fatal(err)
	}
	for _, tb := range d.Tables {
		for _, row := range tb.Rows {
			for i, v := range row {
				var doc any
				if s, isText := v.(string); isText && strings.HasPrefix(s, "{") && json.Unmarshal([]byte(s), &doc) == nil {
					b, _ := json.Marshal(doc)
					row[i] = string(b)
				}
			}
		}
	}
	return d.Tables
}

// roundTrip exports src into a repository and imports it into dst: dst
// then holds the same rows in every exported table, and reads back the
// same users and tokens.
func roundTrip(t *testing.T, src, dst catalog.Catalog, history bool) {
	t.Helper()
	ctx := context.Background()
	r := repotest.NewLocal(t, repo.InitOptions{}).R
	m, err := catalogexport.Export(ctx, catalogtest.Dumper(t, src), r, catalogexport.Options{History: history, Reason: "manual", PartSize: 300})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Parts) < 3 {
		t.Fatalf("an export in parts of 300 bytes has %d parts: the test wants tables cut across parts", len(m.Parts))
	}
	listed, err := catalogexport.List(ctx, r)
	if err != nil || len(listed) != 1 || !reflect.DeepEqual(listed[0], m) {
		t.Fatalf("exports listed: %+v, %v; want the one made", listed, err)
	}
	if _, err := catalogexport.Import(ctx, catalogtest.Dumper(t, dst), r, catalogexport.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	tables := catalog.ExportedTables(history)
	if got, want := dump(t, dst, tables), dump(t, src, tables); !reflect.DeepEqual(got, want) {
		t.Fatalf("imported catalog:\n got  %+v\n want %+v", got, want)
	}
	users, err := dst.ListUsers(ctx)
	if err != nil || len(users) != 1 || users[0].PasswordHash == "" {
		t.Fatalf("users after the import: %+v, %v", users, err)
	}
}

func TestExportImportSQLite(t *testing.T) {
	for _, history := range []bool{false, true} {
		t.Run(fmt.Sprint("history=", history), func(t *testing.T) {
			src := newSQLite(t)
			catalogtest.Populate(t, src)
			roundTrip(t, src, newSQLite(t), history)
		})
	}
}

// The same on PostgreSQL, and across: a SQLite server's export brings
// up a PostgreSQL one and back.
func TestExportImportPostgres(t *testing.T) {
	server := testutil.StartPostgres(t)
	pg := newPostgres(t, server)
	catalogtest.Populate(t, pg)
	roundTrip(t, pg, newPostgres(t, server), true)
	lite := newSQLite(t)
	catalogtest.Populate(t, lite)
	roundTrip(t, lite, newPostgres(t, server), true)
	roundTrip(t, pg, newSQLite(t), true)
}

// failingDumper fails after a number of rows, as a catalog that breaks
// mid-export would.
type failingDumper struct {
	catalog.Dumper
	rows int
}

type failingWriter struct {
	catalog.DumpWriter
	rows *int
}

func (w failingWriter) Row(v []any) error {
	if *w.rows--; *w.rows < 0 {
		return errors.New("the catalog's disk failed")
	}
	return w.DumpWriter.Row(v)
}

func (f *failingDumper) Dump(ctx context.Context, tables []string, w catalog.DumpWriter) (int, error) {
	return f.Dumper.Dump(ctx, tables, failingWriter{DumpWriter: w, rows: &f.rows})
}

// A failed export deletes the parts it wrote, and lists nothing.
func TestFailedExportCleansUp(t *testing.T) {
	ctx := context.Background()
	src := newSQLite(t)
	catalogtest.Populate(t, src)
	l := repotest.NewLocal(t, repo.InitOptions{})
	before := l.Files(t)
	_, err := catalogexport.Export(ctx, &failingDumper{Dumper: catalogtest.Dumper(t, src), rows: 8}, l.R,
		catalogexport.Options{History: true, PartSize: 200})
	if err == nil || !strings.Contains(err.Error(), "the catalog's disk failed") {
		t.Fatalf("export from a failing catalog: %v", err)
	}
	if after := l.Files(t); !reflect.DeepEqual(keys(after), keys(before)) {
		t.Fatalf("objects left by a failed export: %v", strings.Join(added(before, after), ", "))
	}
	if listed, err := catalogexport.List(ctx, l.R); err != nil || len(listed) != 0 {
		t.Fatalf("exports listed after a failed one: %+v, %v", listed, err)
	}
}

func keys(m map[string][]byte) []string { return slices.Sorted(maps.Keys(m)) }

func added(before, after map[string][]byte) []string {
	var out []string
	for k := range after {
		if _, ok := before[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}
