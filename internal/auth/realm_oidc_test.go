package auth

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.RunOIDCProviderIfAsked()
	os.Exit(m.Run())
}

// oidcRealm is the configuration of an OIDC realm of the test provider.
func oidcRealmConfig(p *testutil.OIDCProvider, name string) RealmConfig {
	return RealmConfig{Name: name, Type: RealmOIDC, Comment: "Single sign-on",
		OIDC: OIDCConfig{Issuer: p.Issuer, ClientID: p.ClientID, ClientSecret: p.ClientSecret},
		Roles: []RoleMapping{
			{Value: "backup-admins", Role: "Admin"},
			{Value: "restorers", Role: "RestoreOperator", Path: "/repositories"},
		}}
}

const testCallback = "https://coffer.test/auth/oidc/sso/callback"

// oidcReturn starts a sign-in, follows the browser to the provider, and
// returns the provider's redirect back (not followed).
func oidcReturn(t *testing.T, e *env, realm, remote string) (OIDCReturn, *OIDCStart) {
	t.Helper()
	start, err := e.svc.StartOIDC(context.Background(), realm, testCallback, "/ui/points")
	must(t, err)
	u, _ := url.Parse(start.URL)
	if u.Query().Get("code_challenge_method") != "S256" || u.Query().Get("code_challenge") == "" || u.Query().Get("nonce") == "" {
		t.Fatalf("the authorization request lacks PKCE (S256) or a nonce: %s", start.URL)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(start.URL)
	must(t, err)
	_ = resp.Body.Close()
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound || !strings.HasPrefix(back.String(), testCallback) {
		t.Fatalf("the provider answered %s, Location %q", resp.Status, resp.Header.Get("Location"))
	}
	return OIDCReturn{Realm: realm, Callback: testCallback, Query: back.Query(), Cookie: start.Cookie.Value,
		RemoteAddr: remote}, start
}

// The code flow with PKCE against a real provider: the user its ID token
// names is created in the realm with the roles its groups claim maps to;
// a user of no mapped group, a forged or replayed return and a provider's
// refusal sign nobody in; every attempt is audited with the realm.
func TestOIDCRealmSignIn(t *testing.T) {
	p := testutil.StartOIDCProvider(t)
	e := newRealmEnv(t, oidcRealmConfig(p, "sso"))
	admin := e.setUp()
	ctx := context.Background()

	p.QueueUser(t, testutil.OIDCUser{Subject: "s-1", Username: "Grace", Groups: []string{"engineering", "restorers"}})
	ret, _ := oidcReturn(t, e, "sso", "198.51.100.20")
	ns, next, err := e.svc.FinishOIDC(ctx, ret)
	must(t, err)
	if ns.User != "grace" || next != "/ui/points" || !ns.Subject.Allowed("/repositories/r1", RepoRead) ||
		ns.Subject.Allowed("/", SysAudit) {
		t.Fatalf("grace of restorers: got %s (next %s) %v", ns.User, next, ns.Subject)
	}
	if _, err := e.svc.AuthenticateSession(ctx, ns.Cookie); err != nil {
		t.Fatalf("grace's session: %v", err)
	}
	u, err := e.cat.GetUser(ctx, "grace")
	must(t, err)
	if u.Realm != "sso" || u.PasswordHash != "" {
		t.Fatalf("grace in the catalog: %+v", u)
	}
	// The same return again: the provider has spent its code.
	_, _, err = e.svc.FinishOIDC(ctx, ret)
	wantClass(t, "a replayed return", err, ErrUnauthenticated)

	p.QueueUser(t, testutil.OIDCUser{Subject: "s-2", Username: "heidi", Groups: []string{"engineering"}})
	ret, _ = oidcReturn(t, e, "sso", "198.51.100.20")
	_, _, err = e.svc.FinishOIDC(ctx, ret)
	wantClass(t, "heidi of no mapped group", err, ErrDenied)

	p.QueueUser(t, testutil.OIDCUser{Subject: "s-1", Username: "grace", Groups: []string{"backup-admins"}})
	ret, _ = oidcReturn(t, e, "sso", "198.51.100.20")
	forged := ret
	forged.Query = url.Values{"code": ret.Query["code"], "state": {"not-the-state"}}
	_, _, err = e.svc.FinishOIDC(ctx, forged)
	wantClass(t, "a return with another state", err, ErrUnauthenticated)
	forged = ret
	forged.Cookie = strings.Replace(ret.Cookie, ".", "x.", 1)
	_, _, err = e.svc.FinishOIDC(ctx, forged)
	wantClass(t, "a return with a forged cookie", err, ErrUnauthenticated)
	ns, _, err = e.svc.FinishOIDC(ctx, ret)
	must(t, err)
	if !ns.Subject.Allowed("/", PermModify) {
		t.Fatalf("grace, now of backup-admins only: got %v", ns.Subject)
	}
	acl, err := e.svc.ListACL(ctx, admin)
	must(t, err)
	for _, a := range acl {
		if a.User == "grace" && a.Role != "Admin" {
			t.Errorf("grace keeps %s on %s after leaving its group", a.Role, a.Path)
		}
	}
	_, err = e.svc.Login(ctx, LoginRequest{User: "grace@sso", Password: "anything"})
	wantClass(t, "a password for an OIDC realm", err, ErrInvalid)

	recs, err := e.svc.QueryAudit(ctx, admin, catalog.AuditFilter{Operation: "login"})
	must(t, err)
	var got []string
	for _, r := range recs {
		got = append(got, r.User+" "+r.Result+" "+r.ErrorClass+" "+r.Detail)
	}
	// Newest first. A failed return names no user: none is known before
	// the token is verified, and heidi, refused, is no user.
	want := []string{
		"grace error invalid realm sso",
		"grace ok  realm sso, grants Admin on / and below",
		" denied unauthenticated realm sso",
		" denied unauthenticated realm sso",
		" denied denied realm sso",
		" denied unauthenticated realm sso",
		"grace ok  realm sso, grants RestoreOperator on /repositories and below",
		"admin ok  realm local",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("sign-ins in the audit log:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Failed returns lock the address for the realm like failed passwords.
func TestOIDCRealmThrottled(t *testing.T) {
	p := testutil.StartOIDCProvider(t)
	e := newRealmEnv(t, oidcRealmConfig(p, "sso"))
	ctx := context.Background()
	p.QueueUser(t, testutil.OIDCUser{Subject: "s-1", Username: "grace", Groups: []string{"backup-admins"}})
	ret, _ := oidcReturn(t, e, "sso", "203.0.113.50")
	for i := 0; i < DefaultUserThrottle.Free; i++ {
		forged := ret
		forged.Query = url.Values{"code": {"guess"}, "state": ret.Query["state"]}
		_, _, err := e.svc.FinishOIDC(ctx, forged)
		wantClass(t, "a guessed code", err, ErrUnauthenticated)
	}
	_, _, err := e.svc.FinishOIDC(ctx, ret)
	wantClass(t, "the right code after too many guesses", err, ErrLocked)
	ret.RemoteAddr = "203.0.113.51"
	_, _, err = e.svc.FinishOIDC(ctx, ret)
	must(t, err)
}
