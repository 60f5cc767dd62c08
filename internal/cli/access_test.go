package cli

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
)

// TestAccessCommandsHere: on the server's host the access commands run
// their operations in this process as the local administrator: accounts
// are created, listed, disabled, enabled, given a setup link and deleted,
// ACL entries set and removed, tokens created, listed and revoked, and
// the audit log records what was done.
func TestAccessCommandsHere(t *testing.T) {
	e := newEnv(t)
	e.must("server", "init", "--admin", "root")
	var link api.SetupLink
	if err := json.Unmarshal([]byte(e.must("user", "create", "bob", "--json")), &link); err != nil ||
		link.User != "bob" || !strings.HasPrefix(link.Token, "coffersetup_") {
		t.Fatalf("user create: %+v %v", link, err)
	}
	e.expect(ExitUsage, "user", "create", "bob")
	e.must("user", "password", "bob", "--new-password-file", writeFile(t, e.dir, "pw", "bob's password here"))
	if out := e.must("user", "disable", "bob"); out != "user bob disabled\n" {
		t.Fatalf("user disable: %q", out)
	}
	var users []api.User
	err := json.Unmarshal([]byte(e.must("user", "list", "--json")), &users)
	i := slices.IndexFunc(users, func(u api.User) bool { return u.Name == "bob" })
	if err != nil || len(users) != 2 || i < 0 || users[i].Enabled || !users[i].HasPassword {
		t.Fatalf("user list: %+v %v", users, err)
	}
	e.must("user", "enable", "bob")
	if out := e.must("user", "link", "bob"); !strings.Contains(out, "coffersetup_") {
		t.Fatalf("user link: %q", out)
	}

	e.must("acl", "set", "/repositories", "bob", "Auditor")
	var acl []api.ACLEntry
	if err := json.Unmarshal([]byte(e.must("acl", "list", "--json")), &acl); err != nil ||
		!slices.Contains(acl, api.ACLEntry{Path: "/repositories", User: "bob", Role: "Auditor", Propagate: true}) {
		t.Fatalf("acl list: %+v %v", acl, err)
	}
	tok := strings.TrimSpace(e.must("token", "create", "--user", "bob", "--grant", "/repositories=Auditor", "--comment", "ci"))
	var tokens []api.Token
	if err := json.Unmarshal([]byte(e.must("token", "list", "--user", "bob", "--json")), &tokens); err != nil ||
		tok == "" || len(tokens) != 1 || tokens[0].Comment != "ci" || tokens[0].User != "bob" {
		t.Fatalf("token list: %+v %v", tokens, err)
	}
	e.must("token", "revoke", tokens[0].ID)
	e.expect(ExitNoRepo, "token", "revoke", tokens[0].ID)
	e.must("acl", "remove", "/repositories", "bob", "Auditor")
	e.expect(ExitNoRepo, "acl", "remove", "/repositories", "bob", "Auditor")
	e.must("user", "delete", "bob")
	e.expect(ExitNoRepo, "user", "enable", "bob")

	var records []api.AuditRecord
	if err := json.Unmarshal([]byte(e.must("audit", "--operation", "revoke-token", "--result", "ok", "--json")), &records); err != nil ||
		len(records) != 1 || records[0].Result != "ok" {
		t.Fatalf("audit: %+v %v", records, err)
	}
}
