package sqlcat_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/coffer-backup/coffer/internal/catalog/postgres"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat"
	"github.com/coffer-backup/coffer/internal/catalog/sqlite"
)

func TestLoadMigrations(t *testing.T) {
	good := fstest.MapFS{
		"m/0002_second.sql": {Data: []byte("B")},
		"m/0001_init.sql":   {Data: []byte("A")},
	}
	ms, err := sqlcat.LoadMigrations(good, "m")
	if err != nil || len(ms) != 2 || ms[0].Name != "init" || ms[1].Version != 2 || ms[1].SQL != "B" {
		t.Fatalf("LoadMigrations = %+v, %v", ms, err)
	}
	for name, fsys := range map[string]fstest.MapFS{
		"gap":       {"m/0001_a.sql": {}, "m/0003_c.sql": {}},
		"duplicate": {"m/0001_a.sql": {}, "m/0001_b.sql": {}},
		"bad name":  {"m/0001_a.sql": {}, "m/2_b.sql": {}},
		"not first": {"m/0002_b.sql": {}},
	} {
		if _, err := sqlcat.LoadMigrations(fsys, "m"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The drivers' migrations are the same schema history in two dialects.
func TestDriversShareMigrationHistory(t *testing.T) {
	a, err := sqlite.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	b, err := postgres.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("sqlite has %d migrations, postgres %d", len(a), len(b))
	}
	for i := range a {
		if a[i].Version != b[i].Version || a[i].Name != b[i].Name {
			t.Errorf("migration %d: sqlite %04d_%s, postgres %04d_%s", i, a[i].Version, a[i].Name, b[i].Version, b[i].Name)
		}
		// Every table of one dialect exists in the other.
		for _, tbl := range []string{"jobs", "tasks", "events", "backup_points", "vms", "users", "api_tokens",
			"sessions", "acl", "setup_tokens", "login_throttle", "audit_log"} {
			if strings.Contains(a[i].SQL, "CREATE TABLE "+tbl+" ") != strings.Contains(b[i].SQL, "CREATE TABLE "+tbl+" ") {
				t.Errorf("migration %d: table %s in one dialect only", a[i].Version, tbl)
			}
		}
	}
}
