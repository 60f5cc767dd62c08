package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/catalog"
)

// TestMutatingCallsAreAudited: a successful change, a failed one and a
// refused one are each recorded with the user, the token, the operation,
// the object and the result; reads are not.
func TestMutatingCallsAreAudited(t *testing.T) {
	e := newEnv(t, "")
	admin, auditor := e.tokens["admin"], e.tokens["auditor"]
	adminID, _, _ := auth.ParseAPIToken(admin)
	auditorID, _, _ := auth.ParseAPIToken(auditor)
	before := len(e.audit())
	e.do(admin, "GET", "/repositories/default/stats", nil)
	e.do(admin, "POST", "/repositories/default/verify", map[string]any{})
	e.do(admin, "POST", "/repositories/default/protect", map[string]any{"points": []string{"0123456789ab"}})
	e.do(auditor, "POST", "/repositories/default/gc", map[string]any{})
	recs := e.audit()[:len(e.audit())-before]
	want := []catalog.AuditRecord{ // newest first
		{User: "auditor", TokenID: auditorID, Operation: "gc", Object: "/repositories/default", Result: catalog.AuditDenied, ErrorClass: "denied"},
		{User: "admin", TokenID: adminID, Operation: "protect", Object: "/repositories/default", Result: catalog.AuditError, ErrorClass: "not-found"},
		{User: "admin", TokenID: adminID, Operation: "verify", Object: "/repositories/default", Result: catalog.AuditOK},
	}
	if len(recs) != len(want) {
		t.Fatalf("audit records %+v, want %d", recs, len(want))
	}
	for i, w := range want {
		r := recs[i]
		if r.User != w.User || r.TokenID != w.TokenID || r.Operation != w.Operation || r.Object != w.Object ||
			r.Result != w.Result || r.ErrorClass != w.ErrorClass || r.RemoteAddr == "" {
			t.Errorf("record %d: %+v, want %+v", i, r, w)
		}
	}
}

// TestNoSecretLeaks: tokens, passwords and setup links never appear in
// the server's log, in answers other than the one that hands them out, or
// in the audit log.
func TestNoSecretLeaks(t *testing.T) {
	e := newEnv(t, "")
	admin := e.tokens["admin"]
	newPW := "another long password 42"
	r := e.do(admin, "POST", "/access/users", map[string]any{"name": "dave"})
	var link struct{ Token string }
	r.json(t, &link)
	e.do("", "POST", "/access/setup", map[string]any{"token": link.Token, "password": newPW})
	e.do("", "POST", "/access/login", map[string]any{"user": "dave", "password": newPW})
	e.do("", "POST", "/access/login", map[string]any{"user": newPW, "password": "typed in the wrong field"})
	e.do(admin, "POST", "/repositories/default/keys", map[string]any{"password": "a repository key password"})
	e.do(admin, "GET", "/access/tokens?user=admin", nil)
	secrets := []string{admin[len(admin)-64:], newPW, link.Token, "a repository key password", adminPW}
	audit, _ := json.Marshal(e.audit())
	for _, s := range secrets {
		if strings.Contains(e.logs.String(), s) {
			t.Errorf("the server's log holds the secret %q", s)
		}
		if strings.Contains(string(audit), s) {
			t.Errorf("the audit log holds the secret %q", s)
		}
	}
}

// TestOneLogLinePerRequest: each request is logged once, as JSON, with
// its operation, user, status and duration.
func TestOneLogLinePerRequest(t *testing.T) {
	e := newEnv(t, "")
	e.do(e.tokens["auditor"], "GET", "/repositories/default/stats", nil)
	var lines []map[string]any
	for _, l := range strings.Split(e.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "request" && m["operation"] == "stats" {
			lines = append(lines, m)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d log lines for the request", len(lines))
	}
	l := lines[0]
	if l["user"] != "auditor" || l["status"] != float64(http.StatusOK) || l["duration_seconds"] == nil || l["path"] != Prefix+"/repositories/default/stats" {
		t.Fatalf("log line %v", l)
	}
}
