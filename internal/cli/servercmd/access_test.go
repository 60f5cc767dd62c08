package servercmd_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

// TestAccessCommandsHere: on the server's host the access commands run
// their operations in this process as the local administrator: accounts
// are created, listed, disabled, enabled, given a setup link and deleted,
// ACL entries set and removed, tokens created, listed and revoked, and
// the audit log records what was done.
func TestAccessCommandsHere(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("server", "init", "--admin", "root")
	var link api.SetupLink
	if err := json.Unmarshal([]byte(e.Must("user", "create", "bob", "--json")), &link); err != nil ||
		link.User != "bob" || !strings.HasPrefix(link.Token, "coffersetup_") {
		t.Fatalf("user create: %+v %v", link, err)
	}
	e.Expect(command.ExitUsage, "user", "create", "bob")
	e.Must("user", "password", "bob", "--new-password-file", writeFile(t, e.Dir, "pw", "bob's password here"))
	if out := e.Must("user", "disable", "bob"); out != "user bob disabled\n" {
		t.Fatalf("user disable: %q", out)
	}
	var users []api.User
	err := json.Unmarshal([]byte(e.Must("user", "list", "--json")), &users)
	i := slices.IndexFunc(users, func(u api.User) bool { return u.Name == "bob" })
	if err != nil || len(users) != 2 || i < 0 || users[i].Enabled || !users[i].HasPassword {
		t.Fatalf("user list: %+v %v", users, err)
	}
	e.Must("user", "enable", "bob")
	if out := e.Must("user", "link", "bob"); !strings.Contains(out, "coffersetup_") {
		t.Fatalf("user link: %q", out)
	}

	e.Must("acl", "set", "/repositories", "bob", "Auditor")
	var acl []api.ACLEntry
	if err := json.Unmarshal([]byte(e.Must("acl", "list", "--json")), &acl); err != nil ||
		!slices.Contains(acl, api.ACLEntry{Path: "/repositories", User: "bob", Role: "Auditor", Propagate: true}) {
		t.Fatalf("acl list: %+v %v", acl, err)
	}
	tok := strings.TrimSpace(e.Must("token", "create", "--user", "bob", "--grant", "/repositories=Auditor", "--comment", "ci"))
	var tokens []api.Token
	if err := json.Unmarshal([]byte(e.Must("token", "list", "--user", "bob", "--json")), &tokens); err != nil ||
		tok == "" || len(tokens) != 1 || tokens[0].Comment != "ci" || tokens[0].User != "bob" {
		t.Fatalf("token list: %+v %v", tokens, err)
	}
	e.Must("token", "revoke", tokens[0].ID)
	e.Expect(command.ExitNoRepo, "token", "revoke", tokens[0].ID)
	e.Must("acl", "remove", "/repositories", "bob", "Auditor")
	e.Expect(command.ExitNoRepo, "acl", "remove", "/repositories", "bob", "Auditor")
	e.Must("user", "delete", "bob")
	e.Expect(command.ExitNoRepo, "user", "enable", "bob")

	var records []api.AuditRecord
	if err := json.Unmarshal([]byte(e.Must("audit", "--operation", "revoke-token", "--result", "ok", "--json")), &records); err != nil ||
		len(records) != 1 || records[0].Result != "ok" {
		t.Fatalf("audit: %+v %v", records, err)
	}
}
