package server

import (
	"archive/zip"
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/catalog"
)

// call is a request of the RBAC matrix: an operation a role may or may
// not run.
type call struct {
	name, method, path string
	body               any
}

// TestRolesAreEnforced runs each operation of a table as every role and
// checks the answer against what the role's privileges allow: allowed
// calls get past the access check (whatever the operation then says),
// refused ones get 403 as a problem, and are recorded in the audit log as
// denied. The matrix holds the backup/restore split: whoever starts
// backups cannot read data out, and the restorer cannot prune or run
// policies.
func TestRolesAreEnforced(t *testing.T) {
	e := newEnv(t, "")
	disk := e.point("disk").ID
	calls := []struct {
		call
		allowed []string
	}{
		{call{"list points", "GET", "/repositories/default/points", nil},
			[]string{"admin", "auditor", "backupop", "restoreop", "repoadmin", "editor"}},
		{call{"statistics", "GET", "/repositories/default/stats", nil},
			[]string{"admin", "auditor", "backupop", "restoreop", "repoadmin", "editor"}},
		{call{"download files", "GET", "/repositories/default/points/" + disk + "/volumes", nil},
			[]string{"admin", "restoreop"}},
		{call{"restore a disk", "POST", "/repositories/default/points/" + disk + "/restore", map[string]any{"to": "rbac-%s.raw"}},
			[]string{"admin", "restoreop"}},
		{call{"run a policy", "POST", "/policies/nightly/run?wait=true", nil},
			[]string{"admin", "backupop"}},
		{call{"preview a policy", "GET", "/policies/nightly/preview", nil},
			[]string{"admin", "auditor", "backupop", "restoreop", "editor"}},
		{call{"verify", "POST", "/repositories/default/verify", map[string]any{}},
			[]string{"admin", "backupop", "repoadmin"}},
		{call{"forget", "POST", "/repositories/default/forget", map[string]any{"keep": map[string]any{"keep_last": 10}, "dry_run": true}},
			[]string{"admin", "repoadmin"}},
		{call{"gc", "POST", "/repositories/default/gc", map[string]any{"dry_run": true}},
			[]string{"admin", "repoadmin"}},
		{call{"list keys", "GET", "/repositories/default/keys", nil},
			[]string{"admin", "auditor", "backupop", "restoreop", "repoadmin", "editor"}},
		{call{"add a key", "POST", "/repositories/default/keys", map[string]any{"password": "another one %s"}},
			[]string{"admin", "repoadmin"}},
		{call{"list VMs", "GET", "/vms", nil},
			[]string{"admin", "auditor", "backupop", "restoreop", "editor"}},
		{call{"create a user", "POST", "/access/users", map[string]any{"name": "new-%s"}},
			[]string{"admin"}},
		{call{"read the whole audit log", "GET", "/audit?user=admin", nil}, nil}, // everyone: their own records
	}
	for _, c := range calls {
		for user := range roles {
			t.Run(c.name+" as "+user, func(t *testing.T) {
				body := c.body
				if m, ok := body.(map[string]any); ok {
					body = fill(m, user)
				}
				r := e.do(e.tokens[user], c.method, c.path, body)
				allowed := c.allowed == nil || slices.Contains(c.allowed, user)
				switch {
				case allowed && r.status == http.StatusForbidden:
					t.Fatalf("%s may %s, but was refused: %s", user, c.name, r.body)
				case !allowed:
					r.problem(t, http.StatusForbidden, api.Denied)
				case r.status >= 500:
					t.Fatalf("%s: %d %s", c.name, r.status, r.body)
				}
			})
		}
	}
	// Every refusal is in the audit log, with who and what.
	denied := 0
	for _, rec := range e.audit() {
		if rec.Result == catalog.AuditDenied && rec.ErrorClass == "denied" && rec.TokenID != "" {
			denied++
		}
	}
	want := 0
	for _, c := range calls {
		if c.allowed != nil {
			want += len(roles) - len(c.allowed)
		}
	}
	if denied != want {
		t.Fatalf("the audit log holds %d refusals, want %d", denied, want)
	}
}

func fill(m map[string]any, user string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if s, ok := v.(string); ok && strings.Contains(s, "%s") {
			v = strings.ReplaceAll(s, "%s", user)
		}
		out[k] = v
	}
	return out
}

// TestTenantSeesOnlyItsVM: a RestoreOperator of one VM lists only that
// VM's points (in the repository and in the catalog) and its VM alone,
// restores its points and downloads their files, and is refused the
// points of other VMs and of the shared disk image.
func TestTenantSeesOnlyItsVM(t *testing.T) {
	e := newEnv(t, "")
	tok := e.tokens[tenant]
	for _, path := range []string{"/repositories/default/points", "/points"} {
		var points []api.BackupPoint
		r := e.do(tok, "GET", path, nil)
		r.json(t, &points)
		if r.status != 200 || len(points) != 1 || points[0].VM != tenantVM {
			t.Fatalf("%s as the tenant: %d %+v", path, r.status, points)
		}
	}
	var inv api.Inventory
	r := e.do(tok, "GET", "/vms", nil)
	r.json(t, &inv)
	if r.status != 200 || len(inv.VMs) != 1 || inv.VMs[0].VM != tenantVM {
		t.Fatalf("vms as the tenant: %d %+v", r.status, inv)
	}
	own := e.point(tenantVM).ID
	if r := e.do(tok, "POST", "/repositories/default/points/"+own+"/restore", map[string]any{"to": "tenant.raw"}); r.status != 200 {
		t.Fatalf("the tenant restoring its point: %d %s", r.status, r.body)
	}
	for _, p := range e.points {
		if p.VM == tenantVM {
			continue
		}
		e.do(tok, "GET", "/repositories/default/points/"+p.ID+"/volumes", nil).problem(t, http.StatusForbidden, api.Denied)
		e.do(tok, "POST", "/repositories/default/points/"+p.ID+"/restore", map[string]any{"to": "x.raw"}).
			problem(t, http.StatusForbidden, api.Denied)
	}
	// Nor anything of the repository itself.
	e.do(tok, "GET", "/repositories/default/stats", nil).problem(t, http.StatusForbidden, api.Denied)
}

// TestTokenHoldsAtMostItsUser: a token holds only what its grants give,
// within its user's rights: a restorer's token granted Auditor cannot
// read data out, though its user can; a grant beyond the user's rights
// is refused when the token is made; and a token cannot make tokens.
func TestTokenHoldsAtMostItsUser(t *testing.T) {
	e := newEnv(t, "")
	disk := e.point("disk").ID
	narrow := e.token("restoreop", auth.Grant{Path: "/repositories", Role: auth.RoleAuditor, Propagate: true})
	e.do(e.tokens["restoreop"], "GET", "/repositories/default/points/"+disk+"/volumes", nil)
	e.do(narrow, "GET", "/repositories/default/points/"+disk+"/volumes", nil).problem(t, http.StatusForbidden, api.Denied)
	if r := e.do(narrow, "GET", "/repositories/default/points", nil); r.status != 200 {
		t.Fatalf("the Auditor token listing points: %d %s", r.status, r.body)
	}
	// The backup operator's token cannot be given the restorer's role.
	e.do(e.tokens["backupop"], "POST", "/access/tokens", map[string]any{"lifetime_seconds": 3600,
		"grants": []map[string]any{{"path": "/", "role": "RestoreOperator", "propagate": true}}}).
		problem(t, http.StatusForbidden, api.Denied)
	// A backup operator's token cannot download files, whatever it asks.
	e.do(e.tokens["backupop"], "GET", "/repositories/default/points/"+disk+"/files/archive?path=/", nil).
		problem(t, http.StatusForbidden, api.Denied)
}

// TestSessionsSignInAndOut: the first administrator signs in with its
// password; the session cookie is Secure, HttpOnly, SameSite=Lax and
// host-only, works as a credential, makes an API token (shown once), and
// stops working at sign-out; a cross-site POST with the cookie is refused.
func TestSessionsSignInAndOut(t *testing.T) {
	e := newEnv(t, "")
	r := e.do("", "POST", "/access/login", map[string]any{"user": "Admin", "password": adminPW})
	if r.status != 200 {
		t.Fatalf("login: %d %s", r.status, r.body)
	}
	res := &http.Response{Header: r.header}
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == auth.SessionCookieName {
			cookie = c
		}
	}
	if cookie == nil || !cookie.Secure || !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode || cookie.Domain != "" || cookie.Path != "/" {
		t.Fatalf("session cookie %+v", cookie)
	}
	withCookie := func(method, path, body string, origin string) *http.Response {
		req, _ := http.NewRequest(method, e.http.URL+Prefix+path, strings.NewReader(body))
		req.AddCookie(cookie)
		req.Header.Set("Content-Type", "application/json")
		if origin != "" {
			req.Header.Set("Origin", origin)
			req.Header.Set("Sec-Fetch-Site", "cross-site")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := withCookie("GET", "/repositories/default/points", "", ""); res.StatusCode != 200 {
		t.Fatalf("the session listing points: %d", res.StatusCode)
	}
	if res := withCookie("POST", "/access/tokens", `{"lifetime_seconds": 600}`, "https://evil.example"); res.StatusCode != 403 {
		t.Fatalf("a cross-site POST with the session cookie: %d, want 403", res.StatusCode)
	}
	res = withCookie("POST", "/access/tokens", `{"lifetime_seconds": 600, "grants": [{"path": "/", "role": "Auditor", "propagate": true}]}`, "")
	var nt api.NewToken
	if err := jsonDecode(res, &nt); err != nil || res.StatusCode != 201 || !strings.HasPrefix(nt.Token, "coffer_") {
		t.Fatalf("token from the session: %d %+v %v", res.StatusCode, nt, err)
	}
	var listed []api.Token
	r = e.do(nt.Token, "GET", "/access/tokens", nil)
	r.json(t, &listed)
	if bytes.Contains(r.body, []byte(nt.Token[len(nt.Token)-64:])) {
		t.Fatal("a token's secret is listed")
	}
	if res := withCookie("POST", "/access/logout", "", ""); res.StatusCode != 204 {
		t.Fatalf("logout: %d", res.StatusCode)
	}
	if res := withCookie("GET", "/repositories/default/points", "", ""); res.StatusCode != 401 {
		t.Fatalf("the session after sign-out: %d, want 401", res.StatusCode)
	}
}

// TestDownloadIsAZip: a restorer downloads files of a point as a zip that
// holds them, byte for byte; a file that does not exist is a 404 before
// anything is sent.
func TestDownloadIsAZip(t *testing.T) {
	e := newEnv(t, "")
	p := e.point("disk").ID
	r := e.do(e.tokens["restoreop"], "GET", "/repositories/default/points/"+p+"/files/archive?path=/etc&format=zip", nil)
	if r.status != 200 || r.header.Get("Content-Type") != "application/zip" ||
		!strings.Contains(r.header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("download: %d %v %s", r.status, r.header, r.body)
	}
	zr, err := zip.NewReader(bytes.NewReader(r.body), int64(len(r.body)))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range zr.File {
		if f.Name == "etc/motd" {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(rc)
			rc.Close()
			found = string(b) == motd
		}
	}
	if !found {
		t.Fatalf("etc/motd with its content is not in the zip (%d entries)", len(zr.File))
	}
	e.do(e.tokens["restoreop"], "GET", "/repositories/default/points/"+p+"/files/archive?path=/nowhere", nil).
		problem(t, http.StatusNotFound, api.NotFound)
}
