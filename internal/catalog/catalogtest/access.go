package catalogtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// The access-control records: users, API tokens, sessions, setup tokens,
// ACL entries and login throttles (the audit log is in access_audit.go).

// update runs fn in an access transaction and fails the test on error.
func update(t *testing.T, c catalog.Catalog, fn func(ctx context.Context, tx catalog.AccessTx) error) {
	t.Helper()
	ctx := context.Background()
	ok(t, c.UpdateAccess(ctx, func(tx catalog.AccessTx) error { return fn(ctx, tx) }))
}

// updateErr runs fn in an access transaction and returns its error.
func updateErr(c catalog.Catalog, fn func(ctx context.Context, tx catalog.AccessTx) error) error {
	ctx := context.Background()
	return c.UpdateAccess(ctx, func(tx catalog.AccessTx) error { return fn(ctx, tx) })
}

func wantConflict(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, catalog.ErrConflict) {
		t.Fatalf("%s: got %v, want an error wrapping catalog.ErrConflict", what, err)
	}
}

func user(name string) catalog.User {
	return catalog.User{Name: name, PasswordHash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA", Enabled: true,
		CreatedAt: at(0)}
}

func token(id, owner string) catalog.APIToken {
	return catalog.APIToken{ID: id, User: owner, SecretSHA256: "ab" + id, Comment: "ci " + id, CreatedAt: at(0),
		ExpiresAt: at(24 * time.Hour)}
}

func testUsers(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	alice, bob := user("alice"), user("bob")
	bob.PasswordHash, bob.Enabled = "", false // pending setup
	update(t, c, func(ctx context.Context, tx catalog.AccessTx) error {
		ok(t, tx.InsertUser(ctx, bob))
		ok(t, tx.InsertUser(ctx, alice))
		// A transaction reads its own writes.
		got, err := tx.GetUser(ctx, "alice")
		ok(t, err)
		same(t, "user read in its transaction", got, alice)
		return nil
	})
	wantConflict(t, "second user alice", updateErr(c, func(ctx context.Context, tx catalog.AccessTx) error {
		return tx.InsertUser(ctx, user("alice"))
	}))
	users, err := c.ListUsers(ctx)
	ok(t, err)
	same(t, "users by name", users, []catalog.User{alice, bob})

	alice.PasswordHash = "$argon2id$v=19$m=65536,t=3,p=1$bmV3$bmV3"
	alice.PasswordChangedAt, alice.LastLoginAt = at(time.Hour), at(2*time.Hour)
	alice.Enabled = false
	alice.Realm = "corp" // the realm round-trips
	update(t, c, func(ctx context.Context, tx catalog.AccessTx) error { return tx.UpdateUser(ctx, alice) })
	got, err := c.GetUser(ctx, "alice")
	ok(t, err)
	same(t, "updated user", got, alice)

	_, err = c.GetUser(ctx, "carol")
	wantNotFound(t, "get a missing user", err)
	wantNotFound(t, "update a missing user", updateErr(c, func(ctx context.Context, tx catalog.AccessTx) error {
		return tx.UpdateUser(ctx, user("carol"))
	}))
	wantNotFound(t, "delete a missing user", updateErr(c, func(ctx context.Context, tx catalog.AccessTx) error {
		return tx.DeleteUser(ctx, "carol")
	}))
}

// Deleting a user takes its credentials and ACL entries along and leaves
// the audit log and other users alone.
func testDeleteUserCascades(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	update(t, c, func(ctx context.Context, tx catalog.AccessTx) error {
		for _, u := range []string{"alice", "bob"} {
			ok(t, tx.InsertUser(ctx, user(u)))
			ok(t, tx.InsertAPIToken(ctx, token("t-"+u, u)))
			ok(t, tx.InsertSession(ctx, catalog.Session{IDSHA256: "s-" + u, User: u, CreatedAt: at(0), LastSeenAt: at(0),
				ExpiresAt: at(time.Hour)}))
			ok(t, tx.InsertSetupToken(ctx, catalog.SetupToken{SecretSHA256: "x-" + u, User: u, CreatedAt: at(0),
				ExpiresAt: at(time.Hour)}))
			ok(t, tx.PutACL(ctx, catalog.ACLEntry{Path: "/", User: u, Role: "Auditor", Propagate: true}))
			ok(t, tx.PutACL(ctx, catalog.ACLEntry{Path: "/", User: u, TokenID: "t-" + u, Role: "Auditor"}))
		}
		return tx.AppendAudit(ctx, []catalog.AuditRecord{{Time: at(0), User: "alice", Operation: "login", Result: "ok"}})
	})
	update(t, c, func(ctx context.Context, tx catalog.AccessTx) error { return tx.DeleteUser(ctx, "alice") })

	toks, err := c.ListAPITokens(ctx, "")
	ok(t, err)
	same(t, "tokens left", len(toks), 1)
	ss, err := c.ListSessions(ctx, "")
	ok(t, err)
	same(t, "sessions left", len(ss), 1)
	_, err = c.GetSetupToken(ctx, "x-alice")
	wantNotFound(t, "setup token of a deleted user", err)
	_, err = c.GetSetupToken(ctx, "x-bob")
	ok(t, err)
	acl, err := c.ListACL(ctx, catalog.ACLFilter{})
	ok(t, err)
	same(t, "ACL left", acl, []catalog.ACLEntry{
		{Path: "/", User: "bob", Role: "Auditor", Propagate: true},
		{Path: "/", User: "bob", TokenID: "t-bob", Role: "Auditor"},
	})
	audit, err := c.ListAudit(ctx, catalog.AuditFilter{User: "alice"})
	ok(t, err)
	same(t, "audit records of a deleted user", len(audit), 1)
}

func testAPITokens(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	update(t, c, func(ctx context.Context, tx catalog.AccessTx) error {
		ok(t, tx.InsertUser(ctx, user("alice")))
		ok(t, tx.InsertUser(ctx, user("bob")))
		for _, tok := range []catalog.APIToken{token("b2", "bob"), token("a2", "alice"), token("a1", "alice")} {
			ok(t, tx.InsertAPIToken(ctx, tok))
		}
		return nil
	})
	wantConflict(t, "token ID taken", updateErr(c, func(ctx context.Context, tx catalog.AccessTx) error {
		return tx.InsertAPIToken(ctx, token("a1", "bob"))
	}))
	wantNotFound(t, "token of a missing user", updateErr(c, func(ctx context.Context, tx catalog.AccessTx) error {
		return tx.InsertAPIToken(ctx, token("c1", "carol"))
	}))
	noExpiry := token("n1", "alice")
	noExpiry.ExpiresAt = time.Time{}
	if err := updateErr(c, func(ctx context.Context, tx catalog.AccessTx) error {
		return tx.InsertAPIToken(ctx, noExpiry)
	}); err == nil {
		t.Fatal("a token without an expiry was stored")
	}

	all, err := c.ListAPITokens(ctx, "")
	ok(t, err)
	same(t, "tokens by user and ID", all, []catalog.APIToken{token("a1", "alice"), token("a2", "alice"), token("b2", "bob")})
	mine, err := c.ListAPITokens(ctx, "bob")
	ok(t, err)
	same(t, "bob's tokens", mine, []catalog.APIToken{token("b2", "bob")})

	// Uses move the last-used time forward only.
	ok(t, c.TouchAPIToken(ctx, "a1", at(time.Hour)))
	ok(t, c.TouchAPIToken(ctx, "a1", at(time.Minute)))
	got, err := c.GetAPIToken(ctx, "a1")
	ok(t, err)
	same(t, "last used", got.LastUsedAt, at(time.Hour))
	ok(t, c.TouchAPIToken(ctx, "gone", at(time.Hour))) // a revoked token's late use is no error

	update(t, c, func(ctx context.Context, tx catalog.AccessTx) error {
		ok(t, tx.PutACL(ctx, catalog.ACLEntry{Path: "/system", User: "alice", TokenID: "a1", Role: "Auditor"}))
		ok(t, tx.PutACL(ctx, catalog.ACLEntry{Path: "/system", User: "alice", Role: "Auditor"}))
		return tx.DeleteAPIToken(ctx, "a1")
	})
	_, err = c.GetAPIToken(ctx, "a1")
	wantNotFound(t, "revoked token", err)
	acl, err := c.ListACL(ctx, catalog.ACLFilter{User: "alice"})
	ok(t, err)
	same(t, "ACL after revoking the token", acl, []catalog.ACLEntry{{Path: "/system", User: "alice", Role: "Auditor"}})
	wantNotFound(t, "revoke twice", updateErr(c, func(ctx context.Context, tx catalog.AccessTx) error {
		return tx.DeleteAPIToken(ctx, "a1")
	}))
}

func testSessions(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	sess := func(id, u string, created time.Duration) catalog.Session {
		return catalog.Session{IDSHA256: id, User: u, CreatedAt: at(created), LastSeenAt: at(created),
			ExpiresAt: at(created + 8*time.Hour), RemoteAddr: "192.0.2.7"}
	}
	update(t, c, func(ctx context.Context, tx catalog.AccessTx) error {
		ok(t, tx.InsertUser(ctx, user("alice")))
		ok(t, tx.InsertUser(ctx, user("bob")))
		ok(t, tx.InsertSession(ctx, sess("s2", "alice", time.Minute)))
		ok(t, tx.InsertSession(ctx, sess("s1", "alice", 0)))
		ok(t, tx.InsertSession(ctx, sess("s3", "bob", 0)))
		return nil
	})
	wantConflict(t, "session ID taken", updateErr(c, func(ctx context.Context, tx catalog.AccessTx) error {
		return tx.InsertSession(ctx, sess("s1", "bob", 0))
	}))
	wantNotFound(t, "session of a missing user", updateErr(c, func(ctx context.Context, tx catalog.AccessTx) error {
		return tx.InsertSession(ctx, sess("s9", "carol", 0))
	}))
	list, err := c.ListSessions(ctx, "alice")
	ok(t, err)
	same(t, "alice's sessions by creation", list, []catalog.Session{sess("s1", "alice", 0), sess("s2", "alice", time.Minute)})

	ok(t, c.TouchSession(ctx, "s1", at(30*time.Minute)))
	ok(t, c.TouchSession(ctx, "s1", at(10*time.Minute)))
	got, err := c.GetSession(ctx, "s1")
	ok(t, err)
	same(t, "last seen", got.LastSeenAt, at(30*time.Minute))

	update(t, c, func(ctx context.Context, tx catalog.AccessTx) error {
		n, err := tx.DeleteSessions(ctx, "alice", "s1")
		same(t, "other sessions deleted", n, int64(1))
		return err
	})
	_, err = c.GetSession(ctx, "s2")
	wantNotFound(t, "other session", err)
	update(t, c, func(ctx context.Context, tx catalog.AccessTx) error {
		deleted, err := tx.DeleteSession(ctx, "s1")
		same(t, "sign out", deleted, true)
		ok(t, err)
		deleted, err = tx.DeleteSession(ctx, "s1")
		same(t, "sign out twice", deleted, false)
		return err
	})
	_, err = c.GetSession(ctx, "s1")
	wantNotFound(t, "signed-out session", err)
	_, err = c.GetSession(ctx, "s3")
	ok(t, err)
}

// PruneAccess removes expired and idle sessions, expired setup tokens and
// quiet throttles, and nothing else.
func testPruneAccess(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	now := at(10 * time.Hour)
	update(t, c, func(ctx context.Context, tx catalog.AccessTx) error {
		ok(t, tx.InsertUser(ctx, user("alice")))
		for _, s := range []catalog.Session{
			{IDSHA256: "expired", LastSeenAt: now, ExpiresAt: now},
			{IDSHA256: "idle", LastSeenAt: at(8 * time.Hour), ExpiresAt: at(20 * time.Hour)},
			{IDSHA256: "live", LastSeenAt: at(9*time.Hour + 45*time.Minute), ExpiresAt: at(20 * time.Hour)},
		} {
			s.User, s.CreatedAt = "alice", at(0)
			ok(t, tx.InsertSession(ctx, s))
		}
		ok(t, tx.InsertSetupToken(ctx, catalog.SetupToken{SecretSHA256: "old", User: "alice", CreatedAt: at(0), ExpiresAt: at(time.Hour)}))
		ok(t, tx.InsertSetupToken(ctx, catalog.SetupToken{SecretSHA256: "new", User: "alice", CreatedAt: now, ExpiresAt: at(11 * time.Hour)}))
		ok(t, tx.PutLoginThrottle(ctx, catalog.LoginThrottle{Key: "quiet", Failures: 3, LastFailureAt: at(0)}))
		ok(t, tx.PutLoginThrottle(ctx, catalog.LoginThrottle{Key: "locked", Failures: 9, LastFailureAt: at(0),
			LockedUntil: at(12 * time.Hour)}))
		ok(t, tx.PutLoginThrottle(ctx, catalog.LoginThrottle{Key: "recent", Failures: 1, LastFailureAt: at(9 * time.Hour)}))
		return nil
	})
	n, err := c.PruneAccess(ctx, catalog.AccessPrune{Now: now, SessionIdleBefore: at(9*time.Hour + 30*time.Minute),
		ThrottleBefore: at(8 * time.Hour)})
	ok(t, err)
	same(t, "rows pruned", n, int64(4))
	ss, err := c.ListSessions(ctx, "")
	ok(t, err)
	if len(ss) != 1 || ss[0].IDSHA256 != "live" {
		t.Fatalf("sessions after pruning: %+v", ss)
	}
	_, err = c.GetSetupToken(ctx, "old")
	wantNotFound(t, "expired setup token", err)
	_, err = c.GetSetupToken(ctx, "new")
	ok(t, err)
	_, err = c.GetLoginThrottle(ctx, "quiet")
	wantNotFound(t, "quiet throttle", err)
	for _, k := range []string{"locked", "recent"} {
		_, err = c.GetLoginThrottle(ctx, k)
		ok(t, err)
	}
}

func testSetupTokens(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	st := catalog.SetupToken{SecretSHA256: "h1", User: "admin", CreatedAt: at(0), ExpiresAt: at(time.Hour)}
	update(t, c, func(ctx context.Context, tx catalog.AccessTx) error {
		ok(t, tx.InsertUser(ctx, user("admin")))
		ok(t, tx.InsertSetupToken(ctx, st))
		return tx.InsertSetupToken(ctx, catalog.SetupToken{SecretSHA256: "h2", User: "admin", CreatedAt: at(0), ExpiresAt: at(time.Hour)})
	})
	wantConflict(t, "setup token taken", updateErr(c, func(ctx context.Context, tx catalog.AccessTx) error {
		return tx.InsertSetupToken(ctx, st)
	}))
	got, err := c.GetSetupToken(ctx, "h1")
	ok(t, err)
	same(t, "setup token", got, st)
	// Single use: the first delete wins, the second finds nothing.
	update(t, c, func(ctx context.Context, tx catalog.AccessTx) error { return tx.DeleteSetupToken(ctx, "h1") })
	wantNotFound(t, "setup token used twice", updateErr(c, func(ctx context.Context, tx catalog.AccessTx) error {
		return tx.DeleteSetupToken(ctx, "h1")
	}))
	update(t, c, func(ctx context.Context, tx catalog.AccessTx) error { return tx.DeleteSetupTokens(ctx, "admin") })
	_, err = c.GetSetupToken(ctx, "h2")
	wantNotFound(t, "setup tokens of the user", err)
}

func testACL(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	update(t, c, func(ctx context.Context, tx catalog.AccessTx) error {
		ok(t, tx.InsertUser(ctx, user("alice")))
		ok(t, tx.InsertUser(ctx, user("bob")))
		ok(t, tx.InsertAPIToken(ctx, token("b1", "bob")))
		for _, e := range []catalog.ACLEntry{
			{Path: "/repositories/r1", User: "bob", Role: "BackupOperator", Propagate: true},
			{Path: "/", User: "alice", Role: "Admin", Propagate: true},
			{Path: "/repositories/r1", User: "bob", TokenID: "b1", Role: "Auditor"},
			{Path: "/repositories/r1", User: "bob", Role: "Auditor"},
			{Path: "/repositories/r1", User: "bob", Role: "BackupOperator", Propagate: false}, // sets propagate
		} {
			ok(t, tx.PutACL(ctx, e))
		}
		return nil
	})
	all, err := c.ListACL(ctx, catalog.ACLFilter{})
	ok(t, err)
	same(t, "ACL by path, user, token, role", all, []catalog.ACLEntry{
		{Path: "/", User: "alice", Role: "Admin", Propagate: true},
		{Path: "/repositories/r1", User: "bob", Role: "Auditor"},
		{Path: "/repositories/r1", User: "bob", Role: "BackupOperator"},
		{Path: "/repositories/r1", User: "bob", TokenID: "b1", Role: "Auditor"},
	})
	bobs, err := c.ListACL(ctx, catalog.ACLFilter{User: "bob"})
	ok(t, err)
	same(t, "bob's entries and his tokens'", len(bobs), 3)
	root, err := c.ListACL(ctx, catalog.ACLFilter{Path: "/"})
	ok(t, err)
	same(t, "entries on /", root, all[:1])

	wantNotFound(t, "entry of a missing user", updateErr(c, func(ctx context.Context, tx catalog.AccessTx) error {
		return tx.PutACL(ctx, catalog.ACLEntry{Path: "/", User: "carol", Role: "Admin"})
	}))
	wantNotFound(t, "entry for someone else's token", updateErr(c, func(ctx context.Context, tx catalog.AccessTx) error {
		return tx.PutACL(ctx, catalog.ACLEntry{Path: "/", User: "alice", TokenID: "b1", Role: "Admin"})
	}))
	update(t, c, func(ctx context.Context, tx catalog.AccessTx) error {
		return tx.DeleteACL(ctx, catalog.ACLEntry{Path: "/repositories/r1", User: "bob", Role: "Auditor"})
	})
	wantNotFound(t, "delete a missing entry", updateErr(c, func(ctx context.Context, tx catalog.AccessTx) error {
		return tx.DeleteACL(ctx, catalog.ACLEntry{Path: "/repositories/r1", User: "bob", Role: "Auditor"})
	}))
	bobs, err = c.ListACL(ctx, catalog.ACLFilter{User: "bob"})
	ok(t, err)
	same(t, "bob's entries after a delete", len(bobs), 2)
}

func testLoginThrottle(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	_, err := c.GetLoginThrottle(ctx, "user:x")
	wantNotFound(t, "no failures yet", err)
	l := catalog.LoginThrottle{Key: "user:x", Failures: 1, LastFailureAt: at(0)}
	update(t, c, func(ctx context.Context, tx catalog.AccessTx) error { return tx.PutLoginThrottle(ctx, l) })
	l.Failures, l.LastFailureAt, l.LockedUntil = 6, at(time.Minute), at(2*time.Minute)
	update(t, c, func(ctx context.Context, tx catalog.AccessTx) error { return tx.PutLoginThrottle(ctx, l) })
	got, err := c.GetLoginThrottle(ctx, "user:x")
	ok(t, err)
	same(t, "throttle", got, l)
	update(t, c, func(ctx context.Context, tx catalog.AccessTx) error {
		ok(t, tx.DeleteLoginThrottle(ctx, "user:x"))
		return tx.DeleteLoginThrottle(ctx, "user:x")
	})
	_, err = c.GetLoginThrottle(ctx, "user:x")
	wantNotFound(t, "cleared throttle", err)
}
