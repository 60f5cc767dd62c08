package auth

import (
	"context"
	"errors"
	"fmt"
	"github.com/coffer-backup/coffer/internal/auth/passhash"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// One-time setup links let a user choose a password nobody else knows:
// the first administrator (Bootstrap, printed by coffer server init), a
// user created without a password, or a user an administrator resets.
// The link carries a random token (ParseSetupToken); the catalog keeps
// its SHA-256. Using it deletes it, in the transaction that sets the
// password, so it works once.

var errBadSetupLink = errorf(ErrUnauthenticated,
	"this setup link is unknown, used or expired: ask an administrator for a new one (coffer user link NAME)")

func setupTokenOf(secretHex string) string {
	b, _ := parseHex(secretHex, secretBytes)
	return FormatSetupToken(b)
}

// insertSetupLink stores a link for user, replacing older ones.
func (s *Service) insertSetupLink(ctx context.Context, tx catalog.AccessTx, user, secretHex string, now time.Time) error {
	if err := tx.DeleteSetupTokens(ctx, user); err != nil {
		return err
	}
	b, _ := parseHex(secretHex, secretBytes)
	return tx.InsertSetupToken(ctx, catalog.SetupToken{SecretSHA256: secretHash(b), User: user, CreatedAt: now,
		ExpiresAt: now.Add(s.o.SetupLinkLifetime)})
}

// Bootstrap prepares the first run: when the catalog has no user yet, it
// creates admin (enabled, without a password) with the Admin role on /,
// and returns the token of a one-time setup link for choosing the
// password. Run again before the link was used (it expired, it was lost),
// it replaces the link. Once any user has a password it refuses: coffer
// is set up, and users get links from an administrator.
func (s *Service) Bootstrap(ctx context.Context, admin string) (setupToken string, err error) {
	if err := checkUserName(admin); err != nil {
		return "", err
	}
	now := s.now()
	link := randomHex(secretBytes)
	err = s.store.UpdateAccess(ctx, func(tx catalog.AccessTx) error {
		users, err := tx.ListUsers(ctx)
		if err != nil {
			return err
		}
		pending := false
		for _, u := range users {
			if u.PasswordHash != "" {
				return errorf(ErrConflict, "coffer is set up already (user %s has a password): sign in, "+
					"and give other users setup links with coffer user link NAME", u.Name)
			}
			pending = pending || u.Name == admin
		}
		switch {
		case len(users) == 0:
			if err := tx.InsertUser(ctx, catalog.User{Name: admin, Enabled: true, CreatedAt: now}); err != nil {
				return err
			}
			if err := tx.PutACL(ctx, catalog.ACLEntry{Path: RootPath, User: admin, Role: string(RoleAdmin), Propagate: true}); err != nil {
				return err
			}
		case !pending:
			return errorf(ErrConflict, "setup is pending for user %s: run coffer server init --admin %s for a new link",
				users[0].Name, users[0].Name)
		}
		if err := s.insertSetupLink(ctx, tx, admin, link, now); err != nil {
			return err
		}
		rec := s.auditRecord(Local(), "bootstrap", userObject(admin), nil)
		rec.Detail = "first administrator: " + roleDetail(string(RoleAdmin), RootPath, true) + "; one-time setup link"
		return tx.AppendAudit(ctx, []catalog.AuditRecord{rec})
	})
	if err != nil {
		return "", fmt.Errorf("first-run setup: %w", err)
	}
	return setupTokenOf(link), nil
}

// IssueSetupLink gives an existing user a new one-time link to choose a
// password (a reset by an administrator, who never learns the password);
// it needs Perm.Modify on /access. The user's password, if any, keeps
// working until the link is used.
func (s *Service) IssueSetupLink(ctx context.Context, actor *Subject, user, remote string) (string, error) {
	const op = "issue-setup-link"
	object := userObject(user)
	if err := requirePrivilege(actor, AccessPath, PermModify); err != nil {
		return "", s.auditFailure(ctx, actor, op, object, remote, err)
	}
	now := s.now()
	link := randomHex(secretBytes)
	err := s.store.UpdateAccess(ctx, func(tx catalog.AccessTx) error {
		if u, err := tx.GetUser(ctx, user); err != nil {
			return err
		} else if err := refuseLocalPassword(u); err != nil {
			return err
		}
		if err := s.insertSetupLink(ctx, tx, user, link, now); err != nil {
			return err
		}
		rec := s.auditRecord(actor, op, object, nil)
		rec.RemoteAddr = remote
		return tx.AppendAudit(ctx, []catalog.AuditRecord{rec})
	})
	if err := s.changeError(ctx, actor, op, object, remote, "user "+user, err); err != nil {
		return "", err
	}
	return setupTokenOf(link), nil
}

// CompleteSetup uses a setup link: it sets the user's password, ends the
// user's sessions and deletes the link. It returns the user's name (for
// the sign-in form).
func (s *Service) CompleteSetup(ctx context.Context, token, password, remote string) (string, error) {
	const op = "complete-setup"
	secret, err := ParseSetupToken(token)
	if err != nil {
		return "", err
	}
	h := secretHash(secret)
	now := s.now()
	st, err := s.store.GetSetupToken(ctx, h)
	if errors.Is(err, catalog.ErrNotFound) || (err == nil && !now.Before(st.ExpiresAt)) {
		return "", s.auditFailure(ctx, nil, op, AccessPath, remote, errBadSetupLink)
	}
	if err != nil {
		return "", fmt.Errorf("setup link: %w", err)
	}
	if err := checkNewPassword(password, st.User); err != nil {
		return "", err
	}
	hash := passhash.Hash(password, s.o.Hash)
	err = s.store.UpdateAccess(ctx, func(tx catalog.AccessTx) error {
		// Deleting it first makes it single-use: of two uses at once,
		// the second finds nothing.
		if err := tx.DeleteSetupToken(ctx, h); errors.Is(err, catalog.ErrNotFound) {
			return errBadSetupLink
		} else if err != nil {
			return err
		}
		u, err := tx.GetUser(ctx, st.User)
		if err != nil {
			return err
		}
		u.PasswordHash, u.PasswordChangedAt = hash, now
		if err := tx.UpdateUser(ctx, u); err != nil {
			return err
		}
		if _, err := tx.DeleteSessions(ctx, u.Name, ""); err != nil {
			return err
		}
		if err := tx.DeleteLoginThrottle(ctx, userThrottleKey(u.Name)); err != nil {
			return err
		}
		rec := s.auditRecord(&Subject{User: u.Name}, op, userObject(u.Name), nil)
		rec.RemoteAddr = remote
		return tx.AppendAudit(ctx, []catalog.AuditRecord{rec})
	})
	if errors.Is(err, errBadSetupLink) {
		return "", s.auditFailure(ctx, nil, op, AccessPath, remote, errBadSetupLink)
	}
	if err != nil {
		return "", fmt.Errorf("setup link: %w", err)
	}
	return st.User, nil
}
