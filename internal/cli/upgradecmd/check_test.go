package upgradecmd_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/config"
)

// TestUpgradeCheckNamesWhatWouldChange runs `coffer upgrade check` on a
// host whose catalog does not exist yet, then on one it shares with a
// newer coffer's lease, a repository of a newer format and a deprecated
// key: it names each, and changes nothing (no catalog file created, the
// catalog's bytes the same after it).
func TestUpgradeCheckNamesWhatWouldChange(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Vars["COFFER_STATE_DIR"] = t.TempDir()
	catPath := e.Vars["COFFER_CATALOG"]

	// Nothing yet: every migration is pending, and the check creates no
	// catalog to say so.
	doc := clitest.Decode[api.UpgradeCheck](t, e.Must("upgrade", "check", "--json"))
	if len(doc.Catalog.Pending) == 0 || doc.Catalog.Pending[0] != "0001_init" && !strings.HasPrefix(doc.Catalog.Pending[0], "0001_") ||
		len(doc.Catalog.Pending) != doc.Catalog.Known || doc.Catalog.Schema != 0 {
		t.Errorf("on no catalog, the check says schema %d, pending %v (of %d known), want all pending", doc.Catalog.Schema, doc.Catalog.Pending, doc.Catalog.Known)
	}
	if _, err := os.Stat(catPath); !os.IsNotExist(err) {
		t.Fatalf("upgrade check created the catalog: %v", err)
	}
	if len(doc.Repositories) != 1 || doc.Repositories[0].State != "missing" || !doc.Ready {
		t.Errorf("before init: repositories %+v, ready %v; want the default one missing, and ready", doc.Repositories, doc.Ready)
	}

	e.Must("init")
	e.Must("backup", "disk", e.Image("a.raw", 1<<20, 1), "--name", "a")
	doc = clitest.Decode[api.UpgradeCheck](t, e.Must("upgrade", "check", "--json"))
	if len(doc.Catalog.Pending) != 0 || doc.Catalog.Schema != doc.Catalog.Known || doc.Repositories[0].State != "same" || !doc.Ready {
		t.Errorf("after init and a backup: %+v, want nothing pending, the repository of this format, ready", doc)
	}

	// Other versions: a live lease of a newer server, and one of v0.1.0
	// (whose holder names no version), a key deprecated, a repository
	// of a newer format.
	db, err := sql.Open("sqlite", catPath)
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour).UnixMicro()
	if _, err := db.Exec(`INSERT INTO leases (name, holder, epoch, acquired_at, expires_at) VALUES
		('schedules', 'b/7/8@v9.9.9', 4, 0, ?), ('old', 'a/5/6', 1, 0, ?)`, until, until); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	saved := config.Deprecated
	config.Deprecated = []config.Deprecation{{Key: "log-level", Since: "v0.2.0", Instead: "the log.level key"}}
	t.Cleanup(func() { config.Deprecated = saved })
	if err := os.WriteFile(e.Vars["COFFER_CONFIG"], []byte("log-level: warn\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(e.Repo, "config")
	b, err := os.ReadFile(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgFile, []byte(strings.Replace(string(b), `"format_version": 1`, `"format_version": 9`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	before := sha256File(t, catPath)
	doc = clitest.Decode[api.UpgradeCheck](t, e.Must("upgrade", "check", "--json"))
	if after := sha256File(t, catPath); after != before {
		t.Error("upgrade check changed the catalog")
	}
	if len(doc.LeaseHolders) != 2 {
		t.Fatalf("lease holders of other versions: %+v, want the newer server's and v0.1.0's", doc.LeaseHolders)
	}
	for _, l := range doc.LeaseHolders {
		if want := map[string]string{"schedules": "v9.9.9", "old": ""}[l.Lease]; l.Version != want {
			t.Errorf("lease %s: holder %s of version %q, want %q", l.Lease, l.Holder, l.Version, want)
		}
	}
	if r := doc.Repositories[0]; r.State != "newer" || r.FormatVersion != 9 || doc.Ready {
		t.Errorf("a repository of format 9: %+v, ready %v; want it newer, and not ready", r, doc.Ready)
	}
	if len(doc.DeprecatedKeys) != 1 || doc.DeprecatedKeys[0].Key != "log-level" {
		t.Errorf("deprecated keys: %+v, want log-level", doc.DeprecatedKeys)
	}
	text := e.Must("upgrade", "check")
	for _, want := range []string{"no migration pending", "b/7/8@v9.9.9, coffer v9.9.9", "names none (v0.1.0 or earlier)", "format 9, this coffer's 1: newer",
		"log-level", "not ready"} {
		if !strings.Contains(text, want) {
			t.Errorf("the check's text lacks %q:\n%s", want, text)
		}
	}
}

// TestANewerCatalogIsRefusedWithExitCode8: a catalog a newer coffer
// migrated is refused as a repository of a newer format is, with the
// class unsupported-version, and named so by upgrade check.
func TestANewerCatalogIsRefusedWithExitCode8(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Vars["COFFER_STATE_DIR"] = t.TempDir()
	e.Must("init")
	e.Must("catalog", "points")
	db, err := sql.Open("sqlite", e.Vars["COFFER_CATALOG"])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(context.Background(), `INSERT INTO schema_migrations (version, name, applied_at)
		SELECT MAX(version) + 1, 'next_release', 'now' FROM schema_migrations`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	out := e.Expect(8, "catalog", "points", "--json")
	if doc := clitest.Decode[api.CommandError](t, out); doc.Error.Class != api.UnsupportedVersion || !strings.Contains(doc.Error.Message, "newer") {
		t.Errorf("a newer catalog: %+v, want the class unsupported-version, saying newer", doc)
	}
	doc := clitest.Decode[api.UpgradeCheck](t, e.Must("upgrade", "check", "--json"))
	if !doc.Catalog.Newer || doc.Ready || doc.Catalog.Schema != doc.Catalog.Known+1 {
		t.Errorf("upgrade check on a newer catalog: %+v, want it newer and not ready", doc.Catalog)
	}
}
