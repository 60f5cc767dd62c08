package catalogtest

import (
	"context"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// Second factors: TOTP seeds, recovery codes, WebAuthn credentials and the
// second step of a session.

func testSecondFactors(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	totp := catalog.TOTPSecret{User: "alice", Sealed: "v1:sealed", CreatedAt: at(0)}
	cred := catalog.WebAuthnCredential{ID: "Y3JlZA", User: "alice", Name: "key 1", Credential: []byte(`{"id":"x"}`), CreatedAt: at(0)}
	update(t, c, func(ctx context.Context, tx catalog.AccessTx) error {
		ok(t, tx.InsertUser(ctx, user("alice")))
		ok(t, tx.InsertUser(ctx, user("bob")))
		ok(t, tx.PutTOTP(ctx, totp))
		ok(t, tx.InsertWebAuthnCredential(ctx, cred))
		return tx.ReplaceRecoveryCodes(ctx, "alice", []catalog.RecoveryCode{
			{User: "alice", CodeSHA256: "c1", CreatedAt: at(0)}, {User: "alice", CodeSHA256: "c2", CreatedAt: at(0)}})
	})
	got, err := c.GetTOTP(ctx, "alice")
	ok(t, err)
	same(t, "pending TOTP", got, totp)
	_, err = c.GetTOTP(ctx, "bob")
	wantNotFound(t, "bob's TOTP", err)
	wantNotFound(t, "TOTP of a missing user", updateErr(c, func(ctx context.Context, tx catalog.AccessTx) error {
		return tx.PutTOTP(ctx, catalog.TOTPSecret{User: "carol", Sealed: "x", CreatedAt: at(0)})
	}))

	// Confirming replaces the row.
	totp.ConfirmedAt, totp.LastStep = at(time.Minute), 12345
	update(t, c, func(ctx context.Context, tx catalog.AccessTx) error { return tx.PutTOTP(ctx, totp) })
	got, err = c.GetTOTP(ctx, "alice")
	ok(t, err)
	same(t, "confirmed TOTP", got, totp)

	// A recovery code is used once.
	update(t, c, func(ctx context.Context, tx catalog.AccessTx) error {
		used, err := tx.UseRecoveryCode(ctx, "alice", "c1", at(time.Hour))
		same(t, "first use", used, true)
		ok(t, err)
		used, err = tx.UseRecoveryCode(ctx, "alice", "c1", at(2*time.Hour))
		same(t, "second use", used, false)
		ok(t, err)
		used, err = tx.UseRecoveryCode(ctx, "bob", "c2", at(2*time.Hour))
		same(t, "another's code", used, false)
		return err
	})
	codes, err := c.ListRecoveryCodes(ctx, "alice")
	ok(t, err)
	same(t, "codes", codes, []catalog.RecoveryCode{{User: "alice", CodeSHA256: "c1", CreatedAt: at(0), UsedAt: at(time.Hour)},
		{User: "alice", CodeSHA256: "c2", CreatedAt: at(0)}})
	update(t, c, func(ctx context.Context, tx catalog.AccessTx) error {
		return tx.ReplaceRecoveryCodes(ctx, "alice", []catalog.RecoveryCode{{User: "alice", CodeSHA256: "c3", CreatedAt: at(time.Hour)}})
	})
	codes, err = c.ListRecoveryCodes(ctx, "alice")
	ok(t, err)
	same(t, "codes replaced", len(codes), 1)

	// WebAuthn credentials.
	wantConflict(t, "credential ID taken", updateErr(c, func(ctx context.Context, tx catalog.AccessTx) error {
		return tx.InsertWebAuthnCredential(ctx, catalog.WebAuthnCredential{ID: cred.ID, User: "bob", Credential: []byte("{}"), CreatedAt: at(0)})
	}))
	cred.Credential, cred.LastUsedAt = []byte(`{"id":"x","count":2}`), at(time.Hour)
	update(t, c, func(ctx context.Context, tx catalog.AccessTx) error { return tx.UpdateWebAuthnCredential(ctx, cred) })
	creds, err := c.ListWebAuthnCredentials(ctx, "alice")
	ok(t, err)
	same(t, "credentials", creds, []catalog.WebAuthnCredential{cred})
	update(t, c, func(ctx context.Context, tx catalog.AccessTx) error {
		deleted, err := tx.DeleteWebAuthnCredential(ctx, "bob", cred.ID)
		same(t, "another's credential deleted", deleted, false)
		return err
	})

	// A session's second step.
	sess := catalog.Session{IDSHA256: "s1", User: "alice", CreatedAt: at(0), LastSeenAt: at(0), ExpiresAt: at(time.Hour),
		Pending: catalog.PendingSecondFactor}
	update(t, c, func(ctx context.Context, tx catalog.AccessTx) error {
		ok(t, tx.InsertSession(ctx, sess))
		return tx.SetSessionState(ctx, "s1", catalog.PendingSecondFactor, `{"challenge":"abc"}`)
	})
	s, err := c.GetSession(ctx, "s1")
	ok(t, err)
	same(t, "session in its second step", [2]string{s.Pending, s.Challenge}, [2]string{catalog.PendingSecondFactor, `{"challenge":"abc"}`})
	wantNotFound(t, "state of a missing session", updateErr(c, func(ctx context.Context, tx catalog.AccessTx) error {
		return tx.SetSessionState(ctx, "s9", "", "")
	}))

	// Deleting the user deletes its factors.
	update(t, c, func(ctx context.Context, tx catalog.AccessTx) error { return tx.DeleteUser(ctx, "alice") })
	_, err = c.GetTOTP(ctx, "alice")
	wantNotFound(t, "TOTP of a deleted user", err)
	codes, err = c.ListRecoveryCodes(ctx, "alice")
	ok(t, err)
	creds, err2 := c.ListWebAuthnCredentials(ctx, "alice")
	ok(t, err2)
	same(t, "factors left", len(codes)+len(creds), 0)
}
