package auth

import (
	"context"
	"errors"
	"fmt"
	"github.com/coffer-backup/coffer/internal/auth/idp"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// errOtherRealm refuses a sign-in through a realm the user does not
// belong to (one name, one realm): answered like a wrong password.
var errOtherRealm = errBadCredentials

// openRealmSession signs in a user a realm has vouched for: it creates
// the user (of that realm) at the first sign-in, replaces the user's own
// grants with those the realm's mappings give it now (the directory is
// the truth: a group left is a role lost), and opens a session, all in one
// transaction with its audit record. settle runs in that transaction (the
// throttle's bookkeeping of a successful attempt).
func (s *Service) openRealmSession(ctx context.Context, r *realm, id idp.Identity, remote string,
	settle func(catalog.AccessTx) error) (*NewSession, error) {
	ctx = withSignInRealm(ctx, r.cfg.Name)
	now := s.now()
	grants := r.grants(id)
	if len(grants) == 0 {
		err := errorf(ErrDenied, "%s of realm %s is in no group that grants a role in coffer: ask for one", id.Name, r.cfg.Name)
		return nil, s.failRealmLogin(ctx, id.Name, remote, now, err)
	}
	cookie := randomHex(secretBytes)
	idBytes, _ := ParseSessionCookie(cookie)
	sess := catalog.Session{IDSHA256: secretHash(idBytes), User: id.Name, CreatedAt: now, LastSeenAt: now,
		ExpiresAt: now.Add(s.o.SessionLifetime), RemoteAddr: remote}
	var subject *Subject
	err := s.store.UpdateAccess(ctx, func(tx catalog.AccessTx) error {
		if err := s.provisionRealmUser(ctx, tx, r.cfg.Name, id.Name, grants); err != nil {
			return err
		}
		if err := settle(tx); err != nil {
			return err
		}
		if err := tx.InsertSession(ctx, sess); err != nil {
			return err
		}
		subject = NewSubject(id.Name, "", grants)
		subject.SessionID = sess.IDSHA256
		rec := s.auditRecord(subject, "login", userObject(id.Name), nil)
		rec.RemoteAddr, rec.Detail = remote, realmDetail(r.cfg.Name)+", "+grantsDetail(grants)
		return tx.AppendAudit(ctx, []catalog.AuditRecord{rec})
	})
	if Class(err) == "unauthenticated" {
		return nil, s.failRealmLogin(ctx, id.Name, remote, now, err)
	}
	if err != nil {
		return nil, fmt.Errorf("sign-in through realm %s: %w", r.cfg.Name, err)
	}
	return &NewSession{Cookie: cookie, User: id.Name, ExpiresAt: sess.ExpiresAt, Subject: subject}, nil
}

// provisionRealmUser creates or updates the user of a realm sign-in and
// sets its own grants to grants. A user of that name in another realm (or
// a local one), or one disabled in coffer, is refused.
func (s *Service) provisionRealmUser(ctx context.Context, tx catalog.AccessTx, realmName, name string,
	grants []catalog.ACLEntry) error {
	now := s.now()
	u, err := tx.GetUser(ctx, name)
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		u = catalog.User{Name: name, Enabled: true, CreatedAt: now, Realm: realmName, LastLoginAt: now}
		if err := tx.InsertUser(ctx, u); err != nil {
			return err
		}
	case err != nil:
		return err
	case u.Realm != realmName || !u.Enabled:
		return errOtherRealm
	default:
		u.LastLoginAt = now
		if err := tx.UpdateUser(ctx, u); err != nil {
			return err
		}
	}
	old, err := tx.ListACL(ctx, catalog.ACLFilter{User: name})
	if err != nil {
		return err
	}
	for _, e := range old {
		if e.TokenID == "" {
			if err := tx.DeleteACL(ctx, e); err != nil {
				return err
			}
		}
	}
	for _, e := range grants {
		if err := tx.PutACL(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

// refuseLocalPassword refuses to give a realm's user a password here: its
// realm checks its credentials, and a second password would be a second
// way in that the directory cannot disable.
func refuseLocalPassword(u catalog.User) error {
	if u.Realm == "" {
		return nil
	}
	return errorf(ErrInvalid, "user %s belongs to realm %s, which checks its password: it has no password in coffer "+
		"(change it in the realm)", u.Name, u.Realm)
}

// refuseRealmUserPassword is refuseLocalPassword for a user looked up by
// name (nil when there is no such user: the caller says so).
func (s *Service) refuseRealmUserPassword(ctx context.Context, name string) error {
	u, err := s.store.GetUser(ctx, name)
	if err != nil {
		return nil
	}
	return refuseLocalPassword(u)
}
