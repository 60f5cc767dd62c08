package auth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

func TestSessionIdleTimeout(t *testing.T) {
	e := newEnv(t, Options{SessionIdle: 30 * time.Minute, SessionLifetime: 8 * time.Hour})
	e.setUp()
	ns, err := e.login("admin", adminPassword)
	must(t, err)
	ctx := context.Background()
	// Used every 29 minutes, the session lives on.
	for range 5 {
		e.clock.Advance(29 * time.Minute)
		_, err := e.svc.AuthenticateSession(ctx, ns.Cookie)
		must(t, err)
	}
	// Left alone for the idle timeout, it ends, and stays ended.
	e.clock.Advance(30 * time.Minute)
	_, err = e.svc.AuthenticateSession(ctx, ns.Cookie)
	wantClass(t, "idle session", err, ErrUnauthenticated)
	e.clock.Advance(-20 * time.Minute)
	_, err = e.svc.AuthenticateSession(ctx, ns.Cookie)
	wantClass(t, "ended session, clock set back", err, ErrUnauthenticated)
}

// Activity is recorded at most every touchEvery, so an idle timeout is
// exact to within that much, never later.
func TestSessionActivityIsRecordedCoarsely(t *testing.T) {
	e := newEnv(t, Options{SessionIdle: 30 * time.Minute})
	e.setUp()
	ns, err := e.login("admin", adminPassword)
	must(t, err)
	ctx := context.Background()
	h := ns.Subject.SessionID
	lastSeen := func() time.Time {
		s, err := e.cat.GetSession(ctx, h)
		must(t, err)
		return s.LastSeenAt
	}
	start := e.clock.Now()
	e.clock.Advance(e.svc.touchEvery() - time.Second)
	_, err = e.svc.AuthenticateSession(ctx, ns.Cookie)
	must(t, err)
	if !lastSeen().Equal(start) {
		t.Fatalf("activity within %s was written", e.svc.touchEvery())
	}
	e.clock.Advance(time.Second)
	_, err = e.svc.AuthenticateSession(ctx, ns.Cookie)
	must(t, err)
	if !lastSeen().Equal(e.clock.Now()) {
		t.Fatalf("last seen %s, want %s", lastSeen(), e.clock.Now())
	}
}

func TestSessionAbsoluteTimeout(t *testing.T) {
	e := newEnv(t, Options{SessionIdle: time.Hour, SessionLifetime: 4 * time.Hour})
	e.setUp()
	ns, err := e.login("admin", adminPassword)
	must(t, err)
	ctx := context.Background()
	for range 7 { // busy for 3.5 hours
		e.clock.Advance(30 * time.Minute)
		_, err := e.svc.AuthenticateSession(ctx, ns.Cookie)
		must(t, err)
	}
	e.clock.Advance(30 * time.Minute) // 4 hours after sign-in, however busy
	_, err = e.svc.AuthenticateSession(ctx, ns.Cookie)
	wantClass(t, "session past its lifetime", err, ErrUnauthenticated)
}

func TestLogoutAndSessionEnds(t *testing.T) {
	e := newEnv(t, Options{})
	admin := e.setUp()
	e.addUser(admin, "alice", "alice's pass phrase", Grant{Path: "/", Role: RoleAuditor, Propagate: true})
	ctx := context.Background()
	a1, err := e.login("alice", "alice's pass phrase")
	must(t, err)
	a2, err := e.login("alice", "alice's pass phrase")
	must(t, err)
	if a1.Cookie == a2.Cookie {
		t.Fatal("two sign-ins share a session")
	}
	must(t, e.svc.Logout(ctx, a1.Cookie, ""))
	must(t, e.svc.Logout(ctx, a1.Cookie, "")) // twice is fine
	must(t, e.svc.Logout(ctx, "not a cookie", ""))
	_, err = e.svc.AuthenticateSession(ctx, a1.Cookie)
	wantClass(t, "signed-out session", err, ErrUnauthenticated)
	_, err = e.svc.AuthenticateSession(ctx, a2.Cookie)
	must(t, err)

	// Changing one's password ends the other sessions, not this one.
	a3, err := e.login("alice", "alice's pass phrase")
	must(t, err)
	must(t, e.svc.ChangePassword(ctx, a3.Subject, PasswordChange{User: "alice", Old: "alice's pass phrase", New: "alice's new phrase"}))
	_, err = e.svc.AuthenticateSession(ctx, a2.Cookie)
	wantClass(t, "other session after a password change", err, ErrUnauthenticated)
	_, err = e.svc.AuthenticateSession(ctx, a3.Cookie)
	must(t, err)

	// Disabling the user ends its sessions at once.
	must(t, e.svc.SetUserEnabled(ctx, admin, "alice", false, ""))
	_, err = e.svc.AuthenticateSession(ctx, a3.Cookie)
	wantClass(t, "session of a disabled user", err, ErrUnauthenticated)
}

// A changed ACL applies to a session from its next request.
func TestSessionSeesACLChanges(t *testing.T) {
	e := newEnv(t, Options{})
	admin := e.setUp()
	e.addUser(admin, "alice", "alice's pass phrase", Grant{Path: "/", Role: RoleAuditor, Propagate: true})
	ctx := context.Background()
	ns, err := e.login("alice", "alice's pass phrase")
	must(t, err)
	must(t, e.svc.SetACL(ctx, admin, ACLChange{Path: "/repositories/r1", User: "alice", Role: RoleNoAccess}))
	s, err := e.svc.AuthenticateSession(ctx, ns.Cookie)
	must(t, err)
	if Allowed(s, "/repositories/r1", RepoAudit) || !Allowed(s, "/repositories/r2", RepoAudit) {
		t.Fatalf("rights after the change: r1 %s, r2 %s", s.Privileges("/repositories/r1"), s.Privileges("/repositories/r2"))
	}
}

func TestAuthenticateRequestAndCookie(t *testing.T) {
	e := newEnv(t, Options{})
	e.setUp()
	ctx := context.Background()
	ns, err := e.login("admin", adminPassword)
	must(t, err)

	c := SessionCookie(ns)
	if c.Name != "__Host-coffer-session" || !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode ||
		c.Path != "/" || c.Domain != "" || !c.Expires.Equal(ns.ExpiresAt) {
		t.Fatalf("session cookie %+v", c)
	}
	if err := c.Valid(); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	http.SetCookie(rec, c)
	r := httptest.NewRequest("GET", "/api/v1/tasks", nil)
	r.Header.Set("Cookie", rec.Header().Get("Set-Cookie"))
	s, err := e.svc.AuthenticateRequest(ctx, r)
	must(t, err)
	if s.User != "admin" || s.SessionID == "" {
		t.Fatalf("subject %+v", s)
	}
	if got := SubjectFrom(WithSubject(ctx, s)); got != s || SubjectFrom(ctx) != nil {
		t.Fatal("subject lost in the context")
	}

	// A token wins over a cookie: scripts do not carry cookies, and a
	// request with both is judged by the token.
	tok, err := e.svc.CreateToken(ctx, ns.Subject, TokenRequest{Lifetime: time.Hour})
	must(t, err)
	r.Header.Set("Authorization", "Bearer "+tok.Token)
	s, err = e.svc.AuthenticateRequest(ctx, r)
	must(t, err)
	if s.TokenID != tok.Info.ID {
		t.Fatalf("subject %+v, want the token's", s)
	}
	r.Header.Set("Authorization", "Basic YWRtaW46cGFzcw==")
	_, err = e.svc.AuthenticateRequest(ctx, r)
	wantClass(t, "basic authentication", err, ErrUnauthenticated)

	_, err = e.svc.AuthenticateRequest(ctx, httptest.NewRequest("GET", "/", nil))
	wantClass(t, "no credentials", err, ErrUnauthenticated)
	if cl := ClearSessionCookie(); cl.MaxAge >= 0 || cl.Name != SessionCookieName {
		t.Fatalf("clearing cookie %+v", cl)
	}
}

// Prune reclaims what can no longer be used: idle and expired sessions,
// expired setup links, throttles long quiet.
func TestPrune(t *testing.T) {
	e := newEnv(t, Options{SessionIdle: 30 * time.Minute})
	admin := e.setUp()
	ctx := context.Background()
	_, err := e.svc.CreateUser(ctx, admin, NewUser{Name: "later"}) // a setup link, never used
	must(t, err)
	_, err = e.login("admin", "a wrong guess") // a throttle row
	wantClass(t, "wrong password", err, ErrUnauthenticated)
	fresh, err := e.login("admin", adminPassword)
	must(t, err)
	n, err := e.svc.Prune(ctx)
	must(t, err)
	if n != 0 {
		t.Fatalf("pruned %d rows with nothing expired", n)
	}
	e.clock.Advance(2 * time.Hour) // past the idle timeout, the link, and the throttle's memory
	n, err = e.svc.Prune(ctx)
	must(t, err)
	// The setUp session and fresh, the link, the address's throttle row.
	if n != 4 {
		t.Fatalf("pruned %d rows, want 4", n)
	}
	_, err = e.cat.GetSession(ctx, fresh.Subject.SessionID)
	if !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("idle session after pruning: %v", err)
	}
}
