package repocmd_test

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

// TestCatalogExportAndImport is the runbook of docs/04-policies-and-server.md, "The server's own recovery" on
// a SQLite catalog: the state exported into the repository, the catalog
// lost, imported on a new one, and the points rebuilt: users, tokens,
// ACLs, configuration objects, audit log and points are as they were,
// and an old API token works.
func TestCatalogExportAndImport(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	e.Must("backup", "disk", e.Image("a.img", 2<<20, 1), "--name", "a")
	e.Must("server", "init", "--admin", "root")
	e.Must("user", "create", "bob")
	e.Must("acl", "set", "/repositories", "bob", "Auditor")
	token := strings.TrimSpace(e.Must("token", "create", "--user", "bob", "--grant", "/repositories=Auditor", "--comment", "ci"))
	e.Must("config", "create", "connection", "-f", e.File("lab.yaml", "{name: lab, kind: fake, options: {vms: 1}}\n"))
	e.Must("config", "create", "policy", "-f", e.File("api.yaml", "{name: api, connection: lab}\n"))
	before := clitest.StateOf(t, e)
	if len(before.Config) != 2 {
		t.Fatalf("configuration objects before the export: %+v", before.Config)
	}

	e.Expect(command.ExitUsage, "catalog", "export")
	res := clitest.MustJSON[api.CatalogExportResult](t, e, "catalog", "export", "--to-repository")
	if res.Export.ID == "" || res.Export.Rows == 0 || res.Export.Reason != "manual" || res.Export.History {
		t.Fatalf("export: %+v", res)
	}
	second := clitest.MustJSON[api.CatalogExportResult](t, e, "catalog", "export", "--to-repository", "--history", "--keep", "1")
	if !reflect.DeepEqual(second.Deleted, []string{res.Export.ID}) {
		t.Fatalf("--keep 1 deleted %v, want the first export %s", second.Deleted, res.Export.ID)
	}
	list := clitest.MustJSON[[]api.CatalogExport](t, e, "catalog", "exports")
	if len(list) != 1 || list[0].ID != second.Export.ID || !list[0].History {
		t.Fatalf("exports listed: %+v", list)
	}
	if out := e.Must("catalog", "exports", second.Export.ID); !strings.Contains(out, "users") || !strings.Contains(out, "audit_log") {
		t.Fatalf("catalog exports ID:\n%s", out)
	}
	e.Expect(command.ExitUsage, "catalog", "exports", "../manifest")
	e.Expect(command.ExitNoRepo, "catalog", "exports", "20200101T000000Z-00000000")

	// The host is lost with its catalog; a new one has the repository.
	if err := os.Remove(e.Vars["COFFER_CATALOG"]); err != nil {
		t.Fatal(err)
	}
	e.Expect(command.ExitUsage, "catalog", "import")
	e.Expect(command.ExitNoRepo, "catalog", "import", "--from-repository", "--export", "20200101T000000Z-00000000")
	imp := clitest.MustJSON[api.CatalogImport](t, e, "catalog", "import", "--from-repository")
	if imp.Export.ID != second.Export.ID {
		t.Fatalf("imported %s, want the newest export %s", imp.Export.ID, second.Export.ID)
	}
	e.Must("catalog", "rebuild")
	after := clitest.StateOf(t, e)
	// The commands of this test are audited too: the records exported
	// are those of before the exports.
	if !reflect.DeepEqual(after.Users, before.Users) || !reflect.DeepEqual(after.Tokens, before.Tokens) ||
		!reflect.DeepEqual(after.ACL, before.ACL) || !reflect.DeepEqual(after.Points, before.Points) ||
		!reflect.DeepEqual(after.Config, before.Config) {
		t.Fatalf("state after the import:\n got  %+v\n want %+v", after, before)
	}
	if !reflect.DeepEqual(after.Audit[len(after.Audit)-len(before.Audit):], before.Audit) {
		t.Fatalf("audit log after the import:\n got  %+v\n want %+v", after.Audit, before.Audit)
	}
	// bob's API token, made before the export, works on the new host.
	srv := e.StartServer()
	var who api.Caller
	code, _ := srv.Call(token, "GET", "/access/whoami", nil, &who)
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if code != 200 || who.User != "bob" {
		t.Fatalf("bob's old token after the import: HTTP %d %+v", code, who)
	}

	// A second import is refused: the catalog is no longer empty.
	e.Expect(command.ExitUsage, "catalog", "import", "--from-repository")
	e.Must("catalog", "import", "--from-repository", "--force")
}
