package auth

import (
	"context"
	"errors"
	"fmt"
	"github.com/coffer-backup/coffer/internal/auth/passhash"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// PasswordChange is a request to set a user's password.
type PasswordChange struct {
	User string
	// Old is required when users change their own password: a stolen
	// session alone must not be enough to take the account over. It is
	// checked like a sign-in (throttled, audited).
	Old        string
	New        string
	RemoteAddr string
}

// ChangePassword sets a password. Users change their own with the old
// one (not through an API token); someone with Perm.Modify on /access
// sets anyone else's without it (prefer IssueSetupLink, which leaves the
// choice to the user). Every session of the user ends, except the one
// making the change.
func (s *Service) ChangePassword(ctx context.Context, actor *Subject, c PasswordChange) error {
	const op = "change-password"
	name := c.User
	object := userObject(name)
	self := actor != nil && !actor.local && actor.User == name
	switch {
	case self && actor.IsToken():
		return s.auditFailure(ctx, actor, op, object, c.RemoteAddr,
			errorf(ErrDenied, "an API token cannot change its user's password: sign in as %s", name))
	case !self:
		if err := requirePrivilege(actor, AccessPath, PermModify); err != nil {
			return s.auditFailure(ctx, actor, op, object, c.RemoteAddr, err)
		}
	}
	if err := s.refuseRealmUserPassword(ctx, name); err != nil {
		return s.auditFailure(ctx, actor, op, object, c.RemoteAddr, err)
	}
	if err := checkNewPassword(c.New, name); err != nil {
		return err
	}
	now := s.now()
	var before, after []catalog.LoginThrottle
	var current catalog.User
	if self {
		var err error
		if before, after, err = s.countAttempt(ctx, op, name, c.RemoteAddr, now); err != nil {
			return err
		}
		u, ok, err := s.checkPassword(ctx, name, c.Old)
		if err != nil {
			return err
		}
		if !ok {
			return s.auditFailure(ctx, actor, op, object, c.RemoteAddr,
				errorf(ErrDenied, "the current password is wrong"))
		}
		current = u
	}
	hash := passhash.Hash(c.New, s.o.Hash)
	keep := ""
	if self {
		keep = actor.SessionID
	}
	err := s.store.UpdateAccess(ctx, func(tx catalog.AccessTx) error {
		u, err := tx.GetUser(ctx, name)
		if err != nil {
			return err
		}
		if err := refuseLocalPassword(u); err != nil {
			return err
		}
		if self {
			if u.PasswordHash != current.PasswordHash {
				return errorf(ErrConflict, "the password was changed meanwhile: sign in again")
			}
			if err := settleAttempt(ctx, tx, before, after); err != nil {
				return err
			}
		}
		u.PasswordHash, u.PasswordChangedAt = hash, now
		if err := tx.UpdateUser(ctx, u); err != nil {
			return err
		}
		if _, err := tx.DeleteSessions(ctx, name, keep); err != nil {
			return err
		}
		// A pending setup link would let its holder set the password
		// again: it is void now.
		if err := tx.DeleteSetupTokens(ctx, name); err != nil {
			return err
		}
		rec := s.auditRecord(actor, op, object, nil)
		rec.RemoteAddr = c.RemoteAddr
		return tx.AppendAudit(ctx, []catalog.AuditRecord{rec})
	})
	if errors.Is(err, catalog.ErrNotFound) {
		return s.auditFailure(ctx, actor, op, object, c.RemoteAddr, errorf(ErrNotFound, "user %s does not exist", name))
	}
	if err != nil && Class(err) != "internal" {
		return s.auditFailure(ctx, actor, op, object, c.RemoteAddr, err)
	}
	if err != nil {
		return fmt.Errorf("change password of %s: %w", name, err)
	}
	return nil
}
