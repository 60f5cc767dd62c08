package auth

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

func TestAPITokenLifecycle(t *testing.T) {
	e := newEnv(t, Options{})
	admin := e.setUp()
	e.addUser(admin, "ci", "ci's pass phrase!!", Grant{Path: "/policies", Role: RoleBackupOperator, Propagate: true})
	ctx := context.Background()
	ns, err := e.login("ci", "ci's pass phrase!!")
	must(t, err)
	tok, err := e.svc.CreateToken(ctx, ns.Subject, TokenRequest{Comment: "nightly pipeline", Lifetime: 30 * 24 * time.Hour,
		Grants: []Grant{{Path: "/policies/nightly", Role: RoleBackupOperator}}})
	must(t, err)
	if !strings.HasPrefix(tok.Token, "coffer_"+tok.Info.ID+"_") || len(tok.Token) != len("coffer_")+16+1+64 {
		t.Fatalf("token %q", tok.Token)
	}
	// The catalog keeps the SHA-256 of the secret, not the secret.
	stored, err := e.cat.GetAPIToken(ctx, tok.Info.ID)
	must(t, err)
	_, secret, _ := ParseAPIToken(tok.Token)
	if stored.SecretSHA256 != secretHash(secret) || strings.Contains(tok.Token, stored.SecretSHA256) {
		t.Fatalf("stored %+v", stored)
	}
	if !stored.ExpiresAt.Equal(e.clock.Now().Add(30*24*time.Hour)) || stored.Comment != "nightly pipeline" {
		t.Fatalf("stored %+v", stored)
	}

	s, err := e.svc.AuthenticateToken(ctx, tok.Token)
	must(t, err)
	if s.User != "ci" || s.TokenID != tok.Info.ID || !Allowed(s, "/policies/nightly", PolicyRun) ||
		Allowed(s, "/policies/weekly", PolicyRun) {
		t.Fatalf("token subject %s: nightly %s, weekly %s", s, s.Privileges("/policies/nightly"), s.Privileges("/policies/weekly"))
	}
	used, err := e.cat.GetAPIToken(ctx, tok.Info.ID)
	must(t, err)
	if !used.LastUsedAt.Equal(e.clock.Now()) {
		t.Fatalf("last used %s", used.LastUsedAt)
	}
	list, err := e.svc.ListTokens(ctx, ns.Subject, "ci")
	must(t, err)
	if len(list) != 1 || list[0].ID != tok.Info.ID || len(list[0].Grants) != 1 || list[0].Grants[0].Path != "/policies/nightly" {
		t.Fatalf("tokens %+v", list)
	}

	// A wrong secret, and an unknown ID, get the same answer.
	last := "0"
	if strings.HasSuffix(tok.Token, "0") {
		last = "1"
	}
	wrong := tok.Token[:len(tok.Token)-1] + last
	_, err1 := e.svc.AuthenticateToken(ctx, wrong)
	_, err2 := e.svc.AuthenticateToken(ctx, "coffer_0000000000000000_"+strings.Repeat("00", 32))
	wantClass(t, "wrong secret", err1, ErrUnauthenticated)
	if err2 == nil || err1.Error() != err2.Error() {
		t.Fatalf("wrong secret %v, unknown token %v", err1, err2)
	}

	// Expiry.
	e.clock.Advance(30 * 24 * time.Hour)
	_, err = e.svc.AuthenticateToken(ctx, tok.Token)
	wantClass(t, "expired token", err, ErrUnauthenticated)
	if !strings.Contains(err.Error(), "expired") {
		t.Fatalf("expired token: %v", err)
	}
	e.clock.Advance(-time.Hour)
	_, err = e.svc.AuthenticateToken(ctx, tok.Token)
	must(t, err)

	// A disabled user's tokens stop working, and work again.
	must(t, e.svc.SetUserEnabled(ctx, admin, "ci", false, ""))
	_, err = e.svc.AuthenticateToken(ctx, tok.Token)
	wantClass(t, "token of a disabled user", err, ErrUnauthenticated)
	must(t, e.svc.SetUserEnabled(ctx, admin, "ci", true, ""))
	_, err = e.svc.AuthenticateToken(ctx, tok.Token)
	must(t, err)

	// Revocation by the token itself (a leaked token revokes itself).
	must(t, e.svc.RevokeToken(ctx, s, tok.Info.ID, ""))
	_, err = e.svc.AuthenticateToken(ctx, tok.Token)
	wantClass(t, "revoked token", err, ErrUnauthenticated)
	acl, err := e.cat.ListACL(ctx, catalog.ACLFilter{User: "ci"})
	must(t, err)
	for _, a := range acl {
		if a.TokenID != "" {
			t.Fatalf("ACL entry of a revoked token: %+v", a)
		}
	}
}

func TestTokenLifetimeIsRequiredAndBounded(t *testing.T) {
	e := newEnv(t, Options{MaxTokenLifetime: 90 * 24 * time.Hour})
	admin := e.setUp()
	ctx := context.Background()
	for _, d := range []time.Duration{0, -time.Hour, 90*24*time.Hour + time.Second} {
		_, err := e.svc.CreateToken(ctx, admin, TokenRequest{Lifetime: d})
		wantClass(t, "lifetime "+d.String(), err, ErrInvalid)
	}
	_, err := e.svc.CreateToken(ctx, admin, TokenRequest{Lifetime: 90 * 24 * time.Hour})
	must(t, err)
	_, err = e.svc.CreateToken(ctx, admin, TokenRequest{Lifetime: time.Hour, Comment: "two\nlines"})
	wantClass(t, "comment with a newline", err, ErrInvalid)
}

// A token is given a subset of its user's rights, never more, and loses
// what its user loses.
func TestTokenSubset(t *testing.T) {
	e := newEnv(t, Options{})
	admin := e.setUp()
	e.addUser(admin, "op", "operator's phrase",
		Grant{Path: "/repositories/r1", Role: RoleBackupOperator, Propagate: true},
		Grant{Path: "/connections", Role: RoleAuditor, Propagate: true})
	ctx := context.Background()
	ns, err := e.login("op", "operator's phrase")
	must(t, err)
	op := ns.Subject

	for _, g := range []Grant{
		{Path: "/repositories/r1", Role: RoleRestoreOperator}, // Repo.Read: the user has none
		{Path: "/repositories/r1", Role: RoleRepositoryAdmin}, // Repo.Prune, Repo.Modify: neither
		{Path: "/repositories/r2", Role: RoleAuditor},         // nothing on r2
		{Path: "/", Role: RoleAuditor},                        // Sys.Audit: the user has none
		{Path: "/connections/c1", Role: RoleBackupOperator},   // Conn.Backup: the user has none
	} {
		_, err := e.svc.CreateToken(ctx, op, TokenRequest{Lifetime: time.Hour, Grants: []Grant{g}})
		wantClass(t, "grant "+string(g.Role)+" on "+g.Path, err, ErrDenied)
		if !strings.Contains(err.Error(), "at most its user's rights") {
			t.Fatalf("grant %+v: %v", g, err)
		}
	}
	toks, err := e.svc.ListTokens(ctx, op, "op")
	must(t, err)
	if len(toks) != 0 {
		t.Fatalf("refused grants left tokens: %+v", toks)
	}

	// Auditor holds Sys.Audit and Policy.Audit, which op lacks, but on a
	// repository only Repo.Audit means anything: the grant is a subset.
	tok, err := e.svc.CreateToken(ctx, op, TokenRequest{Lifetime: time.Hour, Grants: []Grant{
		{Path: "/repositories/r1", Role: RoleAuditor}, {Path: "/connections/c1", Role: RoleAuditor, Propagate: true}}})
	must(t, err)
	s, err := e.svc.AuthenticateToken(ctx, tok.Token)
	must(t, err)
	if !Allowed(s, "/repositories/r1", RepoAudit) || Allowed(s, "/repositories/r1", RepoBackup) ||
		!Allowed(s, "/connections/c1/vm/web", ConnAudit) || Allowed(s, "/connections/c2", ConnAudit) {
		t.Fatalf("token rights: r1 %s, c1/vm/web %s, c2 %s", s.Privileges("/repositories/r1"),
			s.Privileges("/connections/c1/vm/web"), s.Privileges("/connections/c2"))
	}
	// Granting the token more later is refused the same way, by its user
	// in person; a grant within the user's rights is not.
	err = e.svc.SetACL(ctx, op, ACLChange{Path: "/repositories/r1", User: "op", TokenID: tok.Info.ID, Role: RoleAdmin})
	wantClass(t, "widen the token", err, ErrDenied)
	must(t, e.svc.SetACL(ctx, op, ACLChange{Path: "/repositories/r1", User: "op", TokenID: tok.Info.ID, Role: RoleBackupOperator}))
	// The token cannot grant itself anything, nor create tokens.
	err = e.svc.SetACL(ctx, s, ACLChange{Path: "/repositories/r1", User: "op", TokenID: tok.Info.ID, Role: RoleAuditor})
	wantClass(t, "token changing its own entries", err, ErrDenied)
	_, err = e.svc.CreateToken(ctx, s, TokenRequest{Lifetime: time.Hour})
	wantClass(t, "token creating a token", err, ErrDenied)

	// The user loses its rights on r1: so does the token, whatever its
	// own entries say.
	must(t, e.svc.RemoveACL(ctx, admin, ACLChange{Path: "/repositories/r1", User: "op", Role: RoleBackupOperator}))
	s, err = e.svc.AuthenticateToken(ctx, tok.Token)
	must(t, err)
	if p := s.Privileges("/repositories/r1"); p != 0 {
		t.Fatalf("token keeps %s on r1 after its user lost it", p)
	}
}

// Others' tokens are someone else's business: creating, listing and
// revoking them needs rights on /access.
func TestOthersTokens(t *testing.T) {
	e := newEnv(t, Options{})
	admin := e.setUp()
	e.addUser(admin, "alice", "alice's pass phrase", Grant{Path: "/", Role: RoleAuditor, Propagate: true})
	e.addUser(admin, "bob", "bob's pass phrase!", Grant{Path: "/", Role: RoleAuditor, Propagate: true})
	ctx := context.Background()
	alice, err := e.login("alice", "alice's pass phrase")
	must(t, err)
	bob, err := e.login("bob", "bob's pass phrase!")
	must(t, err)
	btok, err := e.svc.CreateToken(ctx, bob.Subject, TokenRequest{Lifetime: time.Hour})
	must(t, err)

	_, err = e.svc.CreateToken(ctx, alice.Subject, TokenRequest{User: "bob", Lifetime: time.Hour})
	wantClass(t, "token for someone else", err, ErrDenied)
	wantClass(t, "revoke someone else's token", e.svc.RevokeToken(ctx, alice.Subject, btok.Info.ID, ""), ErrDenied)
	// Auditor holds Sys.Audit on /access: alice may list bob's tokens.
	toks, err := e.svc.ListTokens(ctx, alice.Subject, "bob")
	must(t, err)
	if len(toks) != 1 {
		t.Fatalf("bob's tokens seen by an auditor: %+v", toks)
	}
	// The admin may do all of it.
	atok, err := e.svc.CreateToken(ctx, admin, TokenRequest{User: "alice", Lifetime: time.Hour})
	must(t, err)
	if atok.Info.User != "alice" {
		t.Fatalf("token %+v", atok.Info)
	}
	must(t, e.svc.RevokeToken(ctx, admin, btok.Info.ID, ""))
	wantClass(t, "revoke twice", e.svc.RevokeToken(ctx, admin, btok.Info.ID, ""), ErrNotFound)
}
