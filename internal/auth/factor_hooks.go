package auth

import (
	"context"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// What a second factor kept in a package of its own (security keys,
// internal/auth/securitykey) needs of the access control: its ceremony
// kept in the browser's session, its changes made as mayEnrol and
// mayRemove allow and audited, its proof checked by SecondStep.

// FactorChange changes a user's factors in an access transaction; it
// says what it did, for the audit log.
type FactorChange func(ctx context.Context, tx catalog.AccessTx) (detail string, err error)

// SetCeremony keeps a ceremony's data in the actor's browser session, for
// the step that finishes it: a registration user's own (as mayEnrol
// allows), or the second step of the actor's sign-in.
func (s *Service) SetCeremony(ctx context.Context, actor *Subject, user, data string, registration bool) error {
	switch {
	case actor == nil || actor.SessionID == "":
		return errorf(ErrInvalid, "a security key is used in a browser's session: sign in to the console")
	case registration:
		if err := mayEnrol(actor, user); err != nil {
			return err
		}
	case actor.Pending != catalog.PendingSecondFactor || actor.User != user:
		return errNoStep
	}
	return s.store.UpdateAccess(ctx, func(tx catalog.AccessTx) error {
		sess, err := tx.GetSession(ctx, actor.SessionID)
		if err != nil {
			return err
		}
		return tx.SetSessionState(ctx, sess.IDSHA256, sess.Pending, data)
	})
}

// EnrolFactor runs add, which gives user a factor, as mayEnrol allows: a
// session sent to enrol becomes a full one, and a user who had no factor
// gets recovery codes, returned (shown this once). Audited as op.
func (s *Service) EnrolFactor(ctx context.Context, actor *Subject, user, remote, op string, add FactorChange) ([]string, error) {
	object := userObject(user)
	if err := mayEnrol(actor, user); err != nil {
		return nil, s.auditFailure(ctx, actor, op, object, remote, err)
	}
	var codes []string
	err := s.store.UpdateAccess(ctx, func(tx catalog.AccessTx) error {
		codes = nil
		had, err := hasSecondFactor(ctx, tx, user)
		if err != nil {
			return err
		}
		detail, err := add(ctx, tx)
		if err != nil {
			return err
		}
		if !had {
			var hashed []catalog.RecoveryCode
			codes, hashed = newRecoveryCodes(user, s.now())
			if err := tx.ReplaceRecoveryCodes(ctx, user, hashed); err != nil {
				return err
			}
			detail += "; new recovery codes"
		}
		if err := factorsChanged(ctx, tx, actor); err != nil {
			return err
		}
		rec := s.auditRecord(actor, op, object, nil)
		rec.RemoteAddr, rec.Detail = remote, detail
		return tx.AppendAudit(ctx, []catalog.AuditRecord{rec})
	})
	if err != nil {
		return nil, s.changeError(ctx, actor, op, object, remote, "user "+user, err)
	}
	return codes, nil
}

// RemoveFactor runs remove as mayRemove allows; the recovery codes go
// with the last factor. Audited as op.
func (s *Service) RemoveFactor(ctx context.Context, actor *Subject, user, remote, op string, remove FactorChange) error {
	object := userObject(user)
	if err := mayRemove(actor, user); err != nil {
		return s.auditFailure(ctx, actor, op, object, remote, err)
	}
	err := s.store.UpdateAccess(ctx, func(tx catalog.AccessTx) error {
		detail, err := remove(ctx, tx)
		if err != nil {
			return err
		}
		if err := dropCodesWithoutFactor(ctx, tx, user); err != nil {
			return err
		}
		rec := s.auditRecord(actor, op, object, nil)
		rec.RemoteAddr, rec.Detail = remote, detail
		return tx.AppendAudit(ctx, []catalog.AuditRecord{rec})
	})
	return s.changeError(ctx, actor, op, object, remote, "user "+user, err)
}
