package servercmd_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog/postgres"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestServerExportsItsCatalogBeforeMigrating, on PostgreSQL: a server of
// the next release (COFFER_TEST_NEXT_SCHEMA) exports the catalog's state
// into the repository before it migrates the catalog. That export then
// brings the server back on a new host (a new, empty database), as the
// runbook of docs/04-policies-and-server.md, "The server's own recovery" says: the same users, tokens, ACLs,
// configuration objects, audit log and rebuilt points, and the old API token works.
func TestServerExportsItsCatalogBeforeMigrating(t *testing.T) {
	dsn := testutil.StartPostgres(t)
	e := clitest.NewEnv(t)
	e.Vars["COFFER_CATALOG"] = dsn
	e.Must("init")
	e.Must("backup", "disk", e.Image("a.img", 2<<20, 1), "--name", "a")
	srv := e.StartServer()
	token := e.AdminToken()
	e.Must("user", "create", "bob")
	e.Must("acl", "set", "/repositories", "bob", "Auditor")
	e.Must("config", "create", "connection", "-f", e.File("lab.yaml", "{name: lab, kind: fake, options: {vms: 1}}\n"))
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if list := clitest.MustJSON[[]api.CatalogExport](t, e, "catalog", "exports"); len(list) != 0 {
		t.Fatalf("exports before any migration: %+v", list)
	}
	before := clitest.StateOf(t, e)

	e.Vars["COFFER_TEST_NEXT_SCHEMA"] = "1"
	newer := e.StartServer()
	if err := newer.Stop(); err != nil {
		t.Fatal(err)
	}
	delete(e.Vars, "COFFER_TEST_NEXT_SCHEMA")
	ms, err := postgres.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	list := clitest.MustJSON[[]api.CatalogExport](t, e, "catalog", "exports")
	if len(list) != 1 || list[0].Reason != "before-migration" || list[0].Schema != len(ms) {
		t.Fatalf("exports after the next release started: %+v, want one made before migrating from schema %d", list, len(ms))
	}

	// A new host: an empty database, the repository, this release.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, "CREATE SCHEMA newhost")
	_ = conn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.Vars["COFFER_CATALOG"] = dsn + "&search_path=newhost"
	e.Must("catalog", "import", "--from-repository", "--export", list[0].ID)
	e.Must("catalog", "rebuild")
	after := clitest.StateOf(t, e)
	if !reflect.DeepEqual(after.Users, before.Users) || !reflect.DeepEqual(after.Tokens, before.Tokens) ||
		!reflect.DeepEqual(after.ACL, before.ACL) || !reflect.DeepEqual(after.Points, before.Points) ||
		len(before.Config) != 1 || !reflect.DeepEqual(after.Config, before.Config) {
		t.Fatalf("state on the new host:\n got  %+v\n want %+v", after, before)
	}
	if !reflect.DeepEqual(after.Audit[len(after.Audit)-len(before.Audit):], before.Audit) {
		t.Fatalf("audit log on the new host:\n got  %+v\n want %+v", after.Audit, before.Audit)
	}
	back := e.StartServer()
	defer func() { _ = back.Stop() }()
	var who api.Caller
	if code, _ := back.Call(token, "GET", "/access/whoami", nil, &who); code != 200 || who.User != "admin" {
		t.Fatalf("the old token on the new host: HTTP %d %+v", code, who)
	}
}
