package auth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/sqlite"
)

// No secret is ever recorded: after a day of sign-ins, tokens, setup
// links, password changes and mistakes (a password typed into the user
// name field), neither the catalog's rows, nor the audit log, nor the
// database files' bytes, nor any error returned hold a password, a token,
// a token's secret, a session cookie or a setup link.
func TestNoSecretIsRecorded(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "catalog.db")
	e := newEnvOn(t, func(ctx context.Context) (catalog.Catalog, error) { return sqlite.Open(ctx, path, sqlite.Options{}) }, Options{})
	ctx := context.Background()
	var secrets, errs []string
	keep := func(s ...string) { secrets = append(secrets, s...) }
	note := func(err error) {
		if err != nil {
			errs = append(errs, err.Error())
		}
	}

	link, err := e.svc.Bootstrap(ctx, "admin")
	must(t, err)
	keep(link, strings.TrimPrefix(link, setupPrefix))
	const adminPW = "Admin's pass phrase 1"
	_, err = e.svc.CompleteSetup(ctx, link, adminPW, "192.0.2.1")
	must(t, err)
	keep(adminPW)
	ns, err := e.svc.Login(ctx, LoginRequest{User: "admin", Password: adminPW, RemoteAddr: "192.0.2.1"})
	must(t, err)
	keep(ns.Cookie)
	admin := ns.Subject

	// Mistakes: a password in the name field, wrong passwords, a used
	// link, tokens and cookies that are nearly right.
	for _, pw := range []string{"Typo'd pass phrase 1", "ADMIN'S PASS PHRASE 1"} {
		_, err = e.svc.Login(ctx, LoginRequest{User: "admin", Password: pw, RemoteAddr: "192.0.2.2"})
		note(err)
		keep(pw)
	}
	_, err = e.svc.Login(ctx, LoginRequest{User: adminPW, Password: "admin", RemoteAddr: "192.0.2.3"})
	note(err)
	_, err = e.svc.CompleteSetup(ctx, link, "another pass phrase", "")
	note(err)
	keep("another pass phrase")

	userLink, err := e.svc.CreateUser(ctx, admin, NewUser{Name: "bob"})
	must(t, err)
	keep(userLink, strings.TrimPrefix(userLink, setupPrefix))
	const bobPW = "Bob's first pass phrase"
	_, err = e.svc.CompleteSetup(ctx, userLink, bobPW, "")
	must(t, err)
	keep(bobPW)
	must(t, e.svc.SetACL(ctx, admin, ACLChange{Path: "/", User: "bob", Role: RoleBackupOperator, Propagate: true}))
	bob, err := e.svc.Login(ctx, LoginRequest{User: "bob", Password: bobPW})
	must(t, err)
	keep(bob.Cookie)
	tok, err := e.svc.CreateToken(ctx, bob.Subject, TokenRequest{Comment: "ci", Lifetime: time.Hour,
		Grants: []Grant{{Path: "/policies", Role: RoleBackupOperator, Propagate: true}}})
	must(t, err)
	_, secret, _ := ParseAPIToken(tok.Token)
	keep(tok.Token, fmt.Sprintf("%x", secret))
	_, err = e.svc.AuthenticateToken(ctx, tok.Token)
	must(t, err)
	_, err = e.svc.AuthenticateToken(ctx, tok.Token[:len(tok.Token)-4]+"0000")
	note(err)
	_, err = e.svc.AuthenticateSession(ctx, bob.Cookie[:60]+"ffff")
	note(err)
	const bobPW2 = "Bob's second pass phrase"
	note(e.svc.ChangePassword(ctx, bob.Subject, PasswordChange{User: "bob", Old: "Bob's wrong old phrase", New: bobPW2}))
	keep("Bob's wrong old phrase")
	must(t, e.svc.ChangePassword(ctx, bob.Subject, PasswordChange{User: "bob", Old: bobPW, New: bobPW2}))
	keep(bobPW2)
	reset, err := e.svc.IssueSetupLink(ctx, admin, "bob", "")
	must(t, err)
	keep(reset, strings.TrimPrefix(reset, setupPrefix))
	note(e.svc.ChangePassword(ctx, admin, PasswordChange{User: "bob", New: "short"}))
	must(t, e.svc.RevokeToken(ctx, admin, tok.Info.ID, ""))
	must(t, e.svc.Logout(ctx, bob.Cookie, ""))
	must(t, e.svc.Record(ctx, Event{Subject: admin, Operation: "backup-policy", Object: "/policies/p"}))

	// Everything the catalog returns.
	var rows strings.Builder
	dump := func(v any, err error) {
		if !errors.Is(err, catalog.ErrNotFound) {
			must(t, err)
		}
		fmt.Fprintf(&rows, "%+v\n", v)
	}
	dump(e.cat.ListUsers(ctx))
	dump(e.cat.ListAPITokens(ctx, ""))
	dump(e.cat.ListSessions(ctx, ""))
	dump(e.cat.ListACL(ctx, catalog.ACLFilter{}))
	dump(e.cat.ListAudit(ctx, catalog.AuditFilter{}))
	for _, name := range []string{"admin", "bob", adminPW} {
		dump(e.cat.GetLoginThrottle(ctx, userThrottleKey(name)))
	}
	dump(e.svc.ListTokens(ctx, admin, ""))
	dump(e.svc.ListUsers(ctx, admin))
	must(t, e.cat.Close())
	// And every byte of the database files.
	var files bytes.Buffer
	matches, err := filepath.Glob(path + "*")
	must(t, err)
	for _, f := range matches {
		b, err := os.ReadFile(f)
		must(t, err)
		files.Write(b)
	}
	if files.Len() == 0 || !strings.Contains(rows.String(), "backup-policy") {
		t.Fatal("nothing to scan: the test scans the wrong place")
	}
	for _, s := range secrets {
		for where, text := range map[string]string{"catalog rows": rows.String(), "database files": files.String(),
			"errors": strings.Join(errs, "\n")} {
			// In any case: a typed name is lower-cased before use.
			if strings.Contains(strings.ToLower(text), strings.ToLower(s)) {
				t.Errorf("the secret %q is in the %s", s, where)
			}
		}
	}
	if len(errs) < 7 {
		t.Fatalf("only %d errors collected: %q", len(errs), errs)
	}
}
