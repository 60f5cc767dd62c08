package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/operations"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// A browser's OIDC sign-in through the server's HTTP flow, against a real
// provider process: the sign-in page shows the realm's button, which
// leads to the provider and back to the callback, which opens a session
// (the API then knows the user) and goes on to the console page asked
// for; the audit log has the sign-in with its realm. A return without
// the flow's cookie goes back to the sign-in page with the reason.
func TestOIDCSignInThroughTheServer(t *testing.T) {
	p := testutil.StartOIDCProvider(t)
	ctx := context.Background()
	dir := t.TempDir()
	loc := filepath.Join(dir, "catalog.db")
	cat, err := catalogopen.Open(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	realms, err := auth.NewRealms([]auth.RealmConfig{{Name: "sso", Type: auth.RealmOIDC, Comment: "Example SSO",
		OIDC:  auth.OIDCConfig{Issuer: p.Issuer, ClientID: p.ClientID, ClientSecret: p.ClientSecret},
		Roles: []auth.RoleMapping{{Value: "auditors", Role: "Auditor"}}}})
	if err != nil {
		t.Fatal(err)
	}
	access, err := auth.New(cat, auth.Options{Realms: realms})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := operations.New(service.Config{Catalog: loc, StateDir: filepath.Join(dir, "state"), Access: access, Logger: log})
	ts := httptest.NewTLSServer(New(Config{Service: svc, Access: access, Logger: log}).Handler())
	t.Cleanup(ts.Close)
	browser := ts.Client()
	browser.Jar, _ = cookiejar.New(nil)

	page := get(t, browser, ts.URL+"/ui/login?next=/ui/tasks")
	if !strings.Contains(page, `role="button"`) || !strings.Contains(page, `href="/auth/oidc/sso?next=%2fui%2ftasks"`) ||
		!strings.Contains(page, "Example SSO") {
		t.Fatalf("the sign-in page has no button for realm sso:\n%s", page)
	}
	p.QueueUser(t, testutil.OIDCUser{Subject: "u-7", Username: "ivan", Groups: []string{"auditors"}})
	resp, err := browser.Get(ts.URL + "/auth/oidc/sso?next=/ui/tasks")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.Request.URL.Path != "/ui/tasks" {
		t.Fatalf("the sign-in ended at %s, want /ui/tasks", resp.Request.URL)
	}
	var caller struct{ User string }
	if err := json.Unmarshal([]byte(get(t, browser, ts.URL+"/api/v1/access/whoami")), &caller); err != nil || caller.User != "ivan" {
		t.Fatalf("whoami after the OIDC sign-in: %+v, %v", caller, err)
	}
	recs, err := cat.ListAudit(ctx, catalog.AuditFilter{Operation: "login"})
	if err != nil || len(recs) != 1 || recs[0].User != "ivan" || !strings.HasPrefix(recs[0].Detail, "realm sso") {
		t.Fatalf("the sign-in in the audit log: %+v, %v", recs, err)
	}

	fresh := ts.Client()
	page = get(t, fresh, ts.URL+"/auth/oidc/sso/callback?code=x&state=y")
	if !strings.Contains(page, "not started here") {
		t.Fatalf("a return without the flow's cookie: want the sign-in page saying so, got:\n%s", page)
	}
}

func get(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
