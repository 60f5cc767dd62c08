package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// summary writes a record as "user/token op object result class addr detail".
func summary(r catalog.AuditRecord) string {
	return strings.TrimSpace(fmt.Sprintf("%s/%s %s %s %s %s %s %s", r.User, r.TokenID, r.Operation, r.Object, r.Result,
		r.ErrorClass, r.RemoteAddr, r.Detail))
}

func TestAuditOfAccessChanges(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := context.Background()
	link, err := e.svc.Bootstrap(ctx, "admin")
	must(t, err)
	_, err = e.svc.CompleteSetup(ctx, link, adminPassword, "192.0.2.1")
	must(t, err)
	ns, err := e.svc.Login(ctx, LoginRequest{User: "admin", Password: adminPassword, RemoteAddr: "192.0.2.1"})
	must(t, err)
	admin := ns.Subject
	_, err = e.svc.Login(ctx, LoginRequest{User: "admin", Password: "wrong", RemoteAddr: "192.0.2.2"})
	wantClass(t, "wrong password", err, ErrUnauthenticated)
	_, err = e.svc.Login(ctx, LoginRequest{User: "nobody", Password: "x", RemoteAddr: "192.0.2.3"})
	wantClass(t, "unknown user", err, ErrUnauthenticated)
	_, err = e.svc.CreateUser(ctx, admin, NewUser{Name: "bob", Password: "bob's pass phrase!", RemoteAddr: "192.0.2.1"})
	must(t, err)
	must(t, e.svc.SetACL(ctx, admin, ACLChange{Path: "/repositories/r1", User: "bob", Role: RoleBackupOperator,
		RemoteAddr: "192.0.2.1"}))
	tok, err := e.svc.CreateToken(ctx, admin, TokenRequest{Lifetime: time.Hour, RemoteAddr: "192.0.2.1"})
	must(t, err)
	ts, err := e.svc.AuthenticateToken(ctx, tok.Token)
	must(t, err)
	must(t, e.svc.RevokeToken(ctx, ts, tok.Info.ID, "192.0.2.4"))
	must(t, e.svc.Logout(ctx, ns.Cookie, "192.0.2.1"))

	recs, err := e.svc.QueryAudit(ctx, Local(), catalog.AuditFilter{})
	must(t, err)
	var got []string
	for i := len(recs) - 1; i >= 0; i-- {
		got = append(got, summary(recs[i]))
	}
	id := tok.Info.ID
	want := []string{
		"@local/ bootstrap /access/users/admin ok   first administrator: Admin on / and below; one-time setup link",
		"admin/ complete-setup /access/users/admin ok  192.0.2.1",
		"admin/ login /access/users/admin ok  192.0.2.1 realm local",
		"admin/ login /access/users/admin denied unauthenticated 192.0.2.2 realm local",
		"/ login /access denied unauthenticated 192.0.2.3 realm local", // unknown names are not recorded
		"admin/ create-user /access/users/bob ok  192.0.2.1 with a password",
		"admin/ set-acl /repositories/r1 ok  192.0.2.1 user bob: BackupOperator on /repositories/r1",
		"admin/ create-token /access/users/admin/tokens/" + id + " ok  192.0.2.1 expires " +
			e.clock.Now().Add(time.Hour).Format(time.RFC3339) + "; no grants",
		"admin/" + id + " revoke-token /access/users/admin/tokens/" + id + " ok  192.0.2.4",
		"admin/ logout /access/users/admin ok  192.0.2.1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, r := range recs {
		if !r.Time.Equal(e.clock.Now()) {
			t.Fatalf("record at %s, the clock says %s", r.Time, e.clock.Now())
		}
	}
}

func TestRecordAndQueryAudit(t *testing.T) {
	e := newEnv(t, Options{})
	admin := e.setUp()
	e.addUser(admin, "bob", "bob's pass phrase!", Grant{Path: "/policies", Role: RoleBackupOperator, Propagate: true})
	e.addUser(admin, "aud", "auditor's phrase", Grant{Path: "/system", Role: RoleAuditor})
	ctx := context.Background()
	bob, err := e.login("bob", "bob's pass phrase!")
	must(t, err)
	tok, err := e.svc.CreateToken(ctx, bob.Subject, TokenRequest{Lifetime: time.Hour})
	must(t, err)
	bobToken, err := e.svc.AuthenticateToken(ctx, tok.Token)
	must(t, err)
	for _, ev := range []Event{
		{Subject: bobToken, Operation: "backup-policy", Object: PolicyPath("nightly"), RemoteAddr: "192.0.2.9"},
		{Subject: bobToken, Operation: "restore-vm", Object: VMPath("c1", "web"), Err: errorf(ErrDenied, "no")},
		{Subject: bob.Subject, Operation: "verify", Object: RepositoryPath("r1"), Err: errors.New("disk full"), ErrorClass: "no-space"},
		{Subject: bob.Subject, Operation: "forget", Object: RepositoryPath("r1"), Err: errors.New("x"), ErrorClass: "denied"},
		{Subject: nil, Operation: "list-vms", Object: ConnectionsPath, Err: errNoCredentials},
		{Subject: admin, Operation: "gc", Object: RepositoryPath("r1"), Err: errors.New("boom")},
	} {
		must(t, e.svc.Record(ctx, ev))
	}
	recs, err := e.svc.QueryAudit(ctx, admin, catalog.AuditFilter{Limit: 6})
	must(t, err)
	var got []string
	for _, r := range recs {
		got = append(got, summary(r))
	}
	want := []string{
		"admin/ gc /repositories/r1 error internal",
		"/ list-vms /connections denied unauthenticated",
		"bob/ forget /repositories/r1 denied denied",
		"bob/ verify /repositories/r1 error no-space",
		"bob/" + tok.Info.ID + " restore-vm /connections/c1/vm/web denied denied",
		"bob/" + tok.Info.ID + " backup-policy /policies/nightly ok  192.0.2.9",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Bob, without Sys.Audit on /system, sees his own records only; the
	// auditor (Sys.Audit on /system alone) sees everyone's.
	mine, err := e.svc.QueryAudit(ctx, bob.Subject, catalog.AuditFilter{User: "admin"})
	must(t, err)
	for _, r := range mine {
		if r.User != "bob" {
			t.Fatalf("bob sees a record of %s", r.User)
		}
	}
	if len(mine) == 0 {
		t.Fatal("bob sees none of his records")
	}
	aud, err := e.login("aud", "auditor's phrase")
	must(t, err)
	theirs, err := e.svc.QueryAudit(ctx, aud.Subject, catalog.AuditFilter{User: "admin", Object: "/repositories"})
	must(t, err)
	if len(theirs) != 1 || theirs[0].Operation != "gc" {
		t.Fatalf("the auditor's query: %+v", theirs)
	}
	_, err = e.svc.QueryAudit(ctx, aud.Subject, catalog.AuditFilter{Object: "repositories//x"})
	wantClass(t, "malformed object filter", err, ErrInvalid)
	_, err = e.svc.QueryAudit(ctx, nil, catalog.AuditFilter{})
	wantClass(t, "anonymous query", err, ErrUnauthenticated)
}
