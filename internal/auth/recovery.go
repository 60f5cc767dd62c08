package auth

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// Recovery codes replace the second factor once each, for the day the
// phone or the key is lost. Each is 80 random bits, written as four
// groups of four base32 letters and digits (xxxx-xxxx-xxxx-xxxx); the
// catalog keeps its SHA-256 (80 random bits leave nothing to guess, so a
// fast hash is enough, as for API tokens).

// RecoveryCodeCount is how many codes a user gets at a time.
const RecoveryCodeCount = 10

var recoveryEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// newRecoveryCodes makes a set of codes: as shown, and as stored.
func newRecoveryCodes(user string, now time.Time) ([]string, []catalog.RecoveryCode) {
	shown := make([]string, RecoveryCodeCount)
	stored := make([]catalog.RecoveryCode, RecoveryCodeCount)
	for i := range shown {
		b := make([]byte, 10)
		_, _ = rand.Read(b) // never fails on Linux
		c := strings.ToLower(recoveryEncoding.EncodeToString(b))
		shown[i] = c[0:4] + "-" + c[4:8] + "-" + c[8:12] + "-" + c[12:16]
		stored[i] = catalog.RecoveryCode{User: user, CodeSHA256: recoveryHash(c), CreatedAt: now}
	}
	return shown, stored
}

// recoveryHash is the stored form of a normalised code.
func recoveryHash(code string) string { return secretHash([]byte(code)) }

func unusedRecoveryCodes(ctx context.Context, r catalog.AccessReader, user string) (int, error) {
	codes, err := r.ListRecoveryCodes(ctx, user)
	n := 0
	for _, c := range codes {
		if c.UsedAt.IsZero() {
			n++
		}
	}
	return n, err
}

// dropCodesWithoutFactor removes the recovery codes of a user left with
// no second factor: they would replace nothing.
func dropCodesWithoutFactor(ctx context.Context, tx catalog.AccessTx, user string) error {
	has, err := hasSecondFactor(ctx, tx, user)
	if err != nil || has {
		return err
	}
	return tx.ReplaceRecoveryCodes(ctx, user, nil)
}

// RegenerateRecoveryCodes replaces user's recovery codes with new ones
// (shown this once); the old ones stop working.
func (s *Service) RegenerateRecoveryCodes(ctx context.Context, actor *Subject, user, remote string) ([]string, error) {
	const op = "regenerate-recovery-codes"
	object := userObject(user)
	if err := mayRemove(actor, user); err != nil {
		return nil, s.auditFailure(ctx, actor, op, object, remote, err)
	}
	now := s.now()
	codes, hashed := newRecoveryCodes(user, now)
	err := s.store.UpdateAccess(ctx, func(tx catalog.AccessTx) error {
		has, err := hasSecondFactor(ctx, tx, user)
		if err != nil {
			return err
		}
		if !has {
			return errorf(ErrConflict, "%s has no second factor: recovery codes come with one", user)
		}
		if err := tx.ReplaceRecoveryCodes(ctx, user, hashed); err != nil {
			return err
		}
		rec := s.auditRecord(actor, op, object, nil)
		rec.RemoteAddr = remote
		return tx.AppendAudit(ctx, []catalog.AuditRecord{rec})
	})
	if err != nil {
		return nil, s.changeError(ctx, actor, op, object, remote, "user "+user, err)
	}
	return codes, nil
}
