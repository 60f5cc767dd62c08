package auth

import (
	"context"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

func TestCreateUser(t *testing.T) {
	e := newEnv(t, Options{})
	admin := e.setUp()
	ctx := context.Background()
	for _, name := range []string{"", "Alice", "al ice", "-x", "a/b", "a@b", "ünï", string(make([]byte, 65))} {
		_, err := e.svc.CreateUser(ctx, admin, NewUser{Name: name, Password: "a good pass phrase"})
		wantClass(t, "user name "+name, err, ErrInvalid)
	}
	_, err := e.svc.CreateUser(ctx, admin, NewUser{Name: "alice", Password: "short"})
	wantClass(t, "short password", err, ErrInvalid)
	link, err := e.svc.CreateUser(ctx, admin, NewUser{Name: "alice", Password: "a good pass phrase"})
	must(t, err)
	if link != "" {
		t.Fatalf("a user with a password got a setup link %q", link)
	}
	_, err = e.svc.CreateUser(ctx, admin, NewUser{Name: "alice", Password: "another pass phrase"})
	wantClass(t, "second alice", err, ErrConflict)
	_, err = e.login("alice", "a good pass phrase")
	must(t, err)
}

func TestManagingUsersNeedsPermModify(t *testing.T) {
	e := newEnv(t, Options{})
	admin := e.setUp()
	// An auditor sees users, a repository admin does not, neither changes
	// them.
	e.addUser(admin, "aud", "auditor's phrase", Grant{Path: "/", Role: RoleAuditor, Propagate: true})
	e.addUser(admin, "ra", "repo admin's phrase", Grant{Path: "/", Role: RoleRepositoryAdmin, Propagate: true})
	ctx := context.Background()
	for _, name := range []string{"aud", "ra"} {
		ns, err := e.login(name, map[string]string{"aud": "auditor's phrase", "ra": "repo admin's phrase"}[name])
		must(t, err)
		s := ns.Subject
		_, err = e.svc.CreateUser(ctx, s, NewUser{Name: "mallory", Password: "mallory's phrase"})
		wantClass(t, name+" creates a user", err, ErrDenied)
		wantClass(t, name+" disables admin", e.svc.SetUserEnabled(ctx, s, "admin", false, ""), ErrDenied)
		wantClass(t, name+" deletes admin", e.svc.DeleteUser(ctx, s, "admin", ""), ErrDenied)
		wantClass(t, name+" sets admin's password",
			e.svc.ChangePassword(ctx, s, PasswordChange{User: "admin", New: "taken over!!"}), ErrDenied)
		wantClass(t, name+" grants itself Admin",
			e.svc.SetACL(ctx, s, ACLChange{Path: "/", User: name, Role: RoleAdmin, Propagate: true}), ErrDenied)
		users, err := e.svc.ListUsers(ctx, s)
		must(t, err)
		if want := map[string]int{"aud": 3, "ra": 1}[name]; len(users) != want {
			t.Errorf("%s sees %d users, want %d", name, len(users), want)
		}
		acl, err := e.svc.ListACL(ctx, s)
		must(t, err)
		if want := map[string]int{"aud": 3, "ra": 1}[name]; len(acl) != want {
			t.Errorf("%s sees %d ACL entries, want %d", name, len(acl), want)
		}
	}
	// Every refusal is in the audit log.
	denied, err := e.svc.QueryAudit(ctx, admin, catalog.AuditFilter{Result: catalog.AuditDenied})
	must(t, err)
	if len(denied) != 10 {
		t.Fatalf("%d refusals audited, want 10: %+v", len(denied), denied)
	}
}

// A delegated Perm.Modify reaches its subtree only.
func TestDelegatedPermModify(t *testing.T) {
	e := newEnv(t, Options{})
	admin := e.setUp()
	e.addUser(admin, "owner", "repo owner's phrase", Grant{Path: "/repositories/r1", Role: RoleAdmin, Propagate: true})
	e.addUser(admin, "helper", "helper's pass phrase")
	ctx := context.Background()
	ns, err := e.login("owner", "repo owner's phrase")
	must(t, err)
	must(t, e.svc.SetACL(ctx, ns.Subject, ACLChange{Path: "/repositories/r1", User: "helper", Role: RoleAuditor}))
	wantClass(t, "grant outside the subtree",
		e.svc.SetACL(ctx, ns.Subject, ACLChange{Path: "/repositories/r2", User: "helper", Role: RoleAuditor}), ErrDenied)
	wantClass(t, "grant above the subtree",
		e.svc.SetACL(ctx, ns.Subject, ACLChange{Path: "/", User: "owner", Role: RoleAdmin}), ErrDenied)
	_, err = e.svc.CreateUser(ctx, ns.Subject, NewUser{Name: "x", Password: "a good pass phrase"})
	wantClass(t, "create a user with rights on a repository", err, ErrDenied)
}

// Nothing leaves the server without someone able to manage access.
func TestLastAdminIsKept(t *testing.T) {
	e := newEnv(t, Options{})
	admin := e.setUp()
	ctx := context.Background()
	rootAdmin := ACLChange{Path: "/", User: "admin", Role: RoleAdmin, Propagate: true}
	for what, err := range map[string]error{
		"disable":             e.svc.SetUserEnabled(ctx, admin, "admin", false, ""),
		"delete":              e.svc.DeleteUser(ctx, admin, "admin", ""),
		"remove Admin on /":   e.svc.RemoveACL(ctx, admin, rootAdmin),
		"NoAccess on /access": e.svc.SetACL(ctx, admin, ACLChange{Path: "/access", User: "admin", Role: RoleNoAccess}),
		"Auditor on /access":  e.svc.SetACL(ctx, admin, ACLChange{Path: "/access", User: "admin", Role: RoleAuditor}),
		"non-propagating /": e.svc.SetACL(ctx, admin, ACLChange{Path: "/", User: "admin", Role: RoleAdmin,
			Propagate: false}),
	} {
		wantClass(t, what+" the last admin", err, ErrConflict)
	}
	if users, err := e.svc.ListUsers(ctx, admin); err != nil || len(users) != 1 || !users[0].Enabled {
		t.Fatalf("users after refused changes: %+v, %v", users, err)
	}
	// With a second admin, the first may go.
	e.addUser(admin, "admin2", "second admin's phrase", Grant{Path: "/access", Role: RoleAdmin})
	must(t, e.svc.RemoveACL(ctx, admin, rootAdmin))
	wantClass(t, "disable the new last admin", e.svc.SetUserEnabled(ctx, Local(), "admin2", false, ""), ErrConflict)
}

func TestChangeOwnPassword(t *testing.T) {
	e := newEnv(t, Options{})
	admin := e.setUp()
	e.addUser(admin, "alice", "alice's pass phrase")
	ctx := context.Background()
	ns, err := e.login("alice", "alice's pass phrase")
	must(t, err)
	change := PasswordChange{User: "alice", Old: "wrong old phrase", New: "alice's new phrase"}
	wantClass(t, "wrong old password", e.svc.ChangePassword(ctx, ns.Subject, change), ErrDenied)
	change.Old = "alice's pass phrase"
	change.New = "ALICE"
	wantClass(t, "weak new password", e.svc.ChangePassword(ctx, ns.Subject, change), ErrInvalid)
	// Through a token: refused even with the old password.
	tok, err := e.svc.CreateToken(ctx, ns.Subject, TokenRequest{Lifetime: time.Hour})
	must(t, err)
	ts, err := e.svc.AuthenticateToken(ctx, tok.Token)
	must(t, err)
	change.New = "alice's new phrase"
	wantClass(t, "password change through a token", e.svc.ChangePassword(ctx, ts, change), ErrDenied)
	must(t, e.svc.ChangePassword(ctx, ns.Subject, change))
	_, err = e.login("alice", "alice's new phrase")
	must(t, err)
	// Guessing the old password is throttled like a sign-in.
	for range DefaultUserThrottle.Free {
		_ = e.svc.ChangePassword(ctx, ns.Subject, PasswordChange{User: "alice", Old: "guess", New: "alice's third phrase"})
	}
	change.Old, change.New = "alice's new phrase", "alice's third phrase"
	wantClass(t, "password change after many wrong guesses", e.svc.ChangePassword(ctx, ns.Subject, change), ErrLocked)
}
