package auth

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// The first run: an admin without a password and a one-time link to
// choose one. There is no default password: nothing signs in before the
// link is used.
func TestBootstrap(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := context.Background()
	link, err := e.svc.Bootstrap(ctx, "admin")
	must(t, err)
	if !strings.HasPrefix(link, "coffersetup_") {
		t.Fatalf("setup token %q", link)
	}
	u, err := e.cat.GetUser(ctx, "admin")
	must(t, err)
	if u.PasswordHash != "" || !u.Enabled {
		t.Fatalf("bootstrapped admin %+v", u)
	}
	acl, err := e.cat.ListACL(ctx, catalog.ACLFilter{})
	must(t, err)
	if len(acl) != 1 || acl[0] != (catalog.ACLEntry{Path: "/", User: "admin", Role: "Admin", Propagate: true}) {
		t.Fatalf("bootstrap ACL %+v", acl)
	}
	for _, pw := range []string{"", "admin", "password", "coffer", link} {
		_, err := e.login("admin", pw)
		wantClass(t, "sign-in before setup", err, ErrUnauthenticated)
	}
	// A weak password is refused and leaves the link usable.
	_, err = e.svc.CompleteSetup(ctx, link, "short", "")
	wantClass(t, "weak password", err, ErrInvalid)
	name, err := e.svc.CompleteSetup(ctx, link, adminPassword, "")
	must(t, err)
	if name != "admin" {
		t.Fatalf("setup completed for %q", name)
	}
	_, err = e.login("admin", adminPassword)
	must(t, err)
	// Single use.
	_, err = e.svc.CompleteSetup(ctx, link, "another pass phrase", "")
	wantClass(t, "link used twice", err, ErrUnauthenticated)
	_, err = e.login("admin", "another pass phrase")
	wantClass(t, "password of a used link", err, ErrUnauthenticated)
	// Set up: no second bootstrap.
	_, err = e.svc.Bootstrap(ctx, "admin")
	wantClass(t, "bootstrap of a set-up catalog", err, ErrConflict)
	_, err = e.svc.Bootstrap(ctx, "eve")
	wantClass(t, "bootstrap of another admin", err, ErrConflict)
}

func TestSetupLinkExpiresAndIsReissued(t *testing.T) {
	e := newEnv(t, Options{SetupLinkLifetime: time.Hour})
	ctx := context.Background()
	link, err := e.svc.Bootstrap(ctx, "root")
	must(t, err)
	e.clock.Advance(time.Hour)
	_, err = e.svc.CompleteSetup(ctx, link, adminPassword, "")
	wantClass(t, "expired link", err, ErrUnauthenticated)
	// Running init again before setup was completed replaces the link.
	_, err = e.svc.Bootstrap(ctx, "someone-else")
	wantClass(t, "bootstrap of another name while one is pending", err, ErrConflict)
	link2, err := e.svc.Bootstrap(ctx, "root")
	must(t, err)
	if link2 == link {
		t.Fatal("the same link twice")
	}
	e.clock.Advance(59 * time.Minute)
	_, err = e.svc.CompleteSetup(ctx, link2, adminPassword, "")
	must(t, err)
	users, err := e.cat.ListUsers(ctx)
	must(t, err)
	if len(users) != 1 {
		t.Fatalf("users after two bootstraps: %+v", users)
	}
}

// Two servers starting on one new catalog at once: one creates the first
// admin, the other is told setup is pending for it.
func TestConcurrentBootstrap(t *testing.T) {
	open := freshDB(t)
	a, b := newEnvOn(t, open, Options{}), newEnvOn(t, open, Options{})
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, e := range []*env{a, b} {
		wg.Go(func() { _, errs[i] = e.svc.Bootstrap(context.Background(), []string{"ann", "ben"}[i]) })
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) || !errors.Is(errors.Join(errs...), ErrConflict) {
		t.Fatalf("concurrent bootstraps: %v", errs)
	}
	users, err := a.cat.ListUsers(context.Background())
	must(t, err)
	if len(users) != 1 {
		t.Fatalf("users: %+v", users)
	}
}

// A user created without a password gets a link; an admin can give any
// user a new one (a reset nobody else learns the password of).
func TestUserSetupLinks(t *testing.T) {
	e := newEnv(t, Options{})
	admin := e.setUp()
	ctx := context.Background()
	link, err := e.svc.CreateUser(ctx, admin, NewUser{Name: "dana"})
	must(t, err)
	_, err = e.svc.CompleteSetup(ctx, link, "dana's pass phrase", "")
	must(t, err)
	dana, err := e.login("dana", "dana's pass phrase")
	must(t, err)
	_, err = e.svc.IssueSetupLink(ctx, dana.Subject, "admin", "")
	wantClass(t, "link for someone else without rights", err, ErrDenied)
	reset, err := e.svc.IssueSetupLink(ctx, admin, "dana", "")
	must(t, err)
	// The old password works until the link is used; then the sessions
	// end and only the new one works.
	_, err = e.login("dana", "dana's pass phrase")
	must(t, err)
	_, err = e.svc.CompleteSetup(ctx, reset, "dana's new phrase", "")
	must(t, err)
	_, err = e.svc.AuthenticateSession(ctx, dana.Cookie)
	wantClass(t, "session after a reset", err, ErrUnauthenticated)
	_, err = e.login("dana", "dana's pass phrase")
	wantClass(t, "old password after a reset", err, ErrUnauthenticated)
	_, err = e.login("dana", "dana's new phrase")
	must(t, err)
	// A password change voids pending links.
	pending, err := e.svc.IssueSetupLink(ctx, admin, "dana", "")
	must(t, err)
	must(t, e.svc.ChangePassword(ctx, admin, PasswordChange{User: "dana", New: "set by the admin"}))
	_, err = e.svc.CompleteSetup(ctx, pending, "dana's third phrase", "")
	wantClass(t, "link after a password change", err, ErrUnauthenticated)
}
