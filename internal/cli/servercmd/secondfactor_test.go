package servercmd_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/server"
)

// sessionCall sends a request to the API with a session cookie and
// decodes the answer into out.
func sessionCall(t *testing.T, s *clitest.ServerProc, cookie *http.Cookie, method, path string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.URL+server.Prefix+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.AddCookie(cookie)
	res, err := s.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if out != nil && res.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %s: %v", method, path, b, err)
		}
	}
	return res.StatusCode
}

// signIn signs a user in with a password and returns the session's
// cookie and what it still lacks.
func signIn(t *testing.T, s *clitest.ServerProc, user, password string) (*http.Cookie, string) {
	t.Helper()
	var sess api.Session
	code, h := s.Call("", "POST", "/access/login", map[string]any{"user": user, "password": password}, &sess)
	if code != 200 {
		t.Fatalf("sign-in of %s: %d", user, code)
	}
	return (&http.Response{Header: h}).Cookies()[0], sess.Pending
}

// TestSecondFactorGatesTheSession: with the default
// server.require-second-factor, the administrator's password opens a
// session that reaches nothing but the enrolment (401 everywhere else),
// while the administrator's API token works as before. Once a TOTP is
// confirmed (a code computed here) the session is a full one; the next
// sign-in must take its second step, where a recovery code works once.
// Seeds are sealed with STATE/server/second-factor.key (0600), shared by
// the command line on the server's host.
func TestSecondFactorGatesTheSession(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	s := e.StartServer()
	const pw = "the administrator's pass phrase"
	if code, _ := s.Call("", "POST", "/access/setup", map[string]any{"token": s.SetupToken, "password": pw}, nil); code != 200 {
		t.Fatalf("setup: %d", code)
	}
	cookie, pending := signIn(t, s, "admin", pw)
	if pending != "enrolment" {
		t.Fatalf("the administrator's first sign-in is pending %q, want enrolment", pending)
	}
	for _, c := range []struct{ method, path string }{{"GET", "/repositories/default/points"}, {"POST", "/access/tokens"}, {"GET", "/access/users"}} {
		if code := sessionCall(t, s, cookie, c.method, c.path, map[string]any{}, nil); code != 401 {
			t.Fatalf("%s %s before the enrolment: %d, want 401", c.method, c.path, code)
		}
	}
	tok := e.AdminToken()
	if code, _ := s.Call(tok, "GET", "/repositories/default/points", nil, nil); code != 200 {
		t.Fatalf("the administrator's token meanwhile: %d", code)
	}

	var en api.TOTPEnrolment
	if code := sessionCall(t, s, cookie, "POST", "/access/users/admin/totp", nil, &en); code != 201 || en.Secret == "" || len(en.QRCodePNG) == 0 {
		t.Fatalf("enrol: %d %+v", code, en)
	}
	if code := sessionCall(t, s, cookie, "POST", "/access/users/admin/totp/confirm", api.CodeRequest{Code: "000000"}, nil); code != 401 {
		t.Fatalf("a wrong first code: %d", code)
	}
	code6, _ := totp.GenerateCode(en.Secret, time.Now())
	var rc api.RecoveryCodes
	if code := sessionCall(t, s, cookie, "POST", "/access/users/admin/totp/confirm", api.CodeRequest{Code: code6}, &rc); code != 200 || len(rc.Codes) != 10 {
		t.Fatalf("confirm: %d %+v", code, rc)
	}
	if code := sessionCall(t, s, cookie, "GET", "/repositories/default/points", nil, nil); code != 200 {
		t.Fatalf("points once enrolled: %d", code)
	}

	// The next sign-in takes its second step; a recovery code works once.
	cookie, pending = signIn(t, s, "admin", pw)
	if pending != "second-factor" || sessionCall(t, s, cookie, "GET", "/repositories/default/points", nil, nil) != 401 {
		t.Fatalf("second sign-in pending %q, or the session reached the points", pending)
	}
	if code := sessionCall(t, s, cookie, "POST", "/access/second-factor", api.CodeRequest{Code: rc.Codes[0]}, nil); code != 200 {
		t.Fatalf("a recovery code: %d", code)
	}
	if code := sessionCall(t, s, cookie, "GET", "/repositories/default/points", nil, nil); code != 200 {
		t.Fatalf("points after the second step: %d", code)
	}
	cookie, _ = signIn(t, s, "admin", pw)
	if code := sessionCall(t, s, cookie, "POST", "/access/second-factor", api.CodeRequest{Code: rc.Codes[0]}, nil); code != 401 {
		t.Fatalf("a recovery code used twice: %d", code)
	}

	key := filepath.Join(e.Vars["COFFER_STATE_DIR"], "server", "second-factor.key")
	if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != 32 {
		t.Fatalf("the second-factor key: %v %v", fi, err)
	}
	if strings.Contains(s.Log(), en.Secret) {
		t.Fatal("the server logged the TOTP seed")
	}

	enrolOnTheHost(t, e, s)
}

// initPasswordOnly makes a repository and a configuration whose server
// asks nobody for a second factor: for tests of other things, whose
// administrator signs in with a password (TestSecondFactorGatesTheSession
// has the default).
func initPasswordOnly(e *clitest.Env) {
	e.Must("init")
	e.Config("server:\n  require-second-factor: []\n")
}

// enrolOnTheHost: on the server's host the command line enrols bob with
// the server's key (the server then checks bob's codes), shows and
// removes the TOTP, and the audit log has admin's second steps.
func enrolOnTheHost(t *testing.T, e *clitest.Env, s *clitest.ServerProc) {
	e.Must("user", "create", "bob", "--password-file", writeFile(t, e.Dir, "bobpw", "bob's pass phrase here"))
	e.Must("acl", "set", "/repositories", "bob", "RepositoryAdmin")
	var bobEn api.TOTPEnrolment
	if err := json.Unmarshal([]byte(e.Must("account", "totp", "enrol", "bob", "--json")), &bobEn); err != nil || bobEn.Secret == "" {
		t.Fatalf("account totp enrol: %+v %v", bobEn, err)
	}
	now := time.Now()
	first, _ := totp.GenerateCode(bobEn.Secret, now)
	if out := e.Must("account", "totp", "confirm", "bob", first); !strings.Contains(out, "TOTP of bob confirmed") {
		t.Fatalf("account totp confirm: %q", out)
	}
	bobCookie, pending := signIn(t, s, "bob", "bob's pass phrase here")
	next, _ := totp.GenerateCode(bobEn.Secret, now.Add(30*time.Second)) // the step after the one used
	if code := sessionCall(t, s, bobCookie, "POST", "/access/second-factor", api.CodeRequest{Code: next}, nil); pending != "second-factor" || code != 200 {
		t.Fatalf("bob's second step through the server: pending %q, %d", pending, code)
	}
	var st api.SecondFactors
	if err := json.Unmarshal([]byte(e.Must("account", "show", "bob", "--json")), &st); err != nil || !st.TOTP || st.RecoveryCodes != 10 || !st.Required {
		t.Fatalf("account show: %+v %v", st, err)
	}
	e.Must("account", "totp", "remove", "bob")
	if out := e.Must("account", "show", "bob"); !strings.Contains(out, "TOTP:            none") || !strings.Contains(out, "0 left") {
		t.Fatalf("account show after removal:\n%s", out)
	}
	var records []api.AuditRecord
	if err := json.Unmarshal([]byte(e.Must("audit", "--user", "admin", "--operation", "second-factor", "--json")), &records); err != nil ||
		len(records) != 2 || records[0].Result != "denied" || records[1].Detail != "recovery code (9 left)" {
		t.Fatalf("audit of the second steps: %+v %v", records, err)
	}
}
