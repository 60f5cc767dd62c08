package configcmd_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
)

// TestConfigObjectsFromTheCommandLine: `coffer config` creates, shows,
// changes and deletes objects in the catalog, which `run` and `config
// show` see with their sources; what the file defines, stale versions and
// bad objects are refused with exit 2, missing ones with 7.
func TestConfigObjectsFromTheCommandLine(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Vars["COFFER_STATE_DIR"] = t.TempDir()
	e.Must("init")
	e.Config(`
connections:
  - {name: lab, kind: fake, options: {seed: 8, vms: 3, hosts: 1, datastores: 1, disk-size: 128KiB}}
policies:
  - {name: filed, connection: lab}
`)
	file := func(name, doc string) string {
		p := filepath.Join(e.Dir, name)
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	e.Must("config", "create", "policy", "-f", file("api.yaml", "name: api\nconnection: lab\nselect: {names: [web-*]}\n"))
	if out := e.Must("config", "get", "policy", "api"); !strings.Contains(out, "# policy api: catalog, version 1, created by @local") ||
		!strings.Contains(out, "connection: lab") {
		t.Fatalf("config get:\n%s", out)
	}
	if out := e.Must("run", "api"); !strings.Contains(out, "(policy api): success, 1 of 1 VMs backed up") {
		t.Fatalf("run of the policy created with config create:\n%s", out)
	}
	var show api.ConfigShow
	if err := json.Unmarshal([]byte(e.Must("config", "show", "--json")), &show); err != nil {
		t.Fatal(err)
	}
	var sources []string
	for _, o := range show.Objects {
		sources = append(sources, o.Kind+"/"+o.Name+":"+o.Source)
	}
	if strings.Join(sources, " ") != "connection/lab:file policy/api:catalog policy/filed:file" || show.Generation != 1 {
		t.Fatalf("config show: %s, generation %d", strings.Join(sources, " "), show.Generation)
	}

	changed := file("changed.yaml", "connection: lab\nschedule: '@daily'\n")
	e.Must("config", "update", "policy", "api", "-f", changed, "--if-version", "1")
	if out := e.Expect(2, "config", "update", "policy", "api", "-f", changed, "--if-version", "1"); !strings.Contains(out, "changed since version 1") {
		t.Fatalf("a stale update:\n%s", out)
	}
	if out := e.Expect(2, "config", "update", "policy", "filed", "-f", changed); !strings.Contains(out, "is defined in the configuration file") {
		t.Fatalf("an update of the file's policy:\n%s", out)
	}
	if out := e.Expect(2, "config", "create", "policy", "-f", file("bad.yaml", "name: bad\nconnection: lab\nscheduel: '@daily'\n")); !strings.Contains(out,
		`unknown key "scheduel" in policies[0] (did you mean "schedule"?)`) {
		t.Fatalf("a bad policy:\n%s", out)
	}
	if out := e.Expect(2, "config", "delete", "connection", "lab"); !strings.Contains(out, "is defined in the configuration file") {
		t.Fatalf("deleting the file's connection:\n%s", out)
	}
	if out := e.Must("policy", "preview", "--draft", file("draft.yaml", "name: draft\nconnection: lab\nselect: {names: [db-*]}\n")); !strings.Contains(out,
		"lab: 1 of 3 VMs: db-0001") {
		t.Fatalf("preview of a draft:\n%s", out)
	}
	if out := e.Must("config", "list", "policies"); !strings.Contains(out, "api") || strings.Contains(out, "draft") {
		t.Fatalf("config list after a preview:\n%s", out)
	}
	e.Must("config", "delete", "policy", "api", "--if-version", "2")
	e.Expect(7, "config", "get", "policy", "api")
}
