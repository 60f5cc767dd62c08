package auth

import (
	"context"
	"errors"
	"fmt"
	"github.com/coffer-backup/coffer/internal/auth/autherr"
	"github.com/coffer-backup/coffer/internal/auth/passhash"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// LoginRequest is a sign-in with a password.
type LoginRequest struct {
	User       string
	Password   string
	RemoteAddr string // the client's address (http.Request.RemoteAddr)
	// Realm names the sign-in realm ("" : the user's own, see
	// passwordRealm; User may also be "name@realm").
	Realm string
}

// NewSession is a signed-in browser session.
type NewSession struct {
	// Cookie is the value of the session cookie (SessionCookie): the
	// session's secret, shown to nobody else.
	Cookie    string
	User      string
	ExpiresAt time.Time
	Subject   *Subject
	// Pending is what the session lacks before it is a full one: the
	// second step (catalog.PendingSecondFactor), or the enrolment of a
	// second factor (catalog.PendingEnrolment); "" for none.
	Pending string
}

// errBadCredentials is the one answer to a failed sign-in, whatever the
// cause (unknown user, wrong password, disabled user, no password yet):
// the message and the work done are the same, so neither tells whether a
// user exists.
var errBadCredentials = autherr.BadCredentials

// normalizeUserName is the name a sign-in looks up: names are stored in
// lower case.
func normalizeUserName(typed string) string { return strings.ToLower(typed) }

// throttleKey is one key a sign-in is counted against.
type throttleKey struct {
	key     string
	policy  ThrottlePolicy
	address bool
}

func (s *Service) throttleKeys(name, remote string) []throttleKey {
	keys := []throttleKey{{key: userThrottleKey(name), policy: s.o.UserThrottle}}
	if remote != "" {
		keys = append(keys, throttleKey{key: addressThrottleKey(remote), policy: s.o.AddressThrottle, address: true})
	}
	return keys
}

// countAttempt counts a sign-in attempt against its keys before the
// password is checked, and refuses it (*LockedError, audited) when a key
// is locked. It returns the keys' state before and after, for
// settleAttempt.
func (s *Service) countAttempt(ctx context.Context, op, name, remote string, now time.Time) (before, after []catalog.LoginThrottle, err error) {
	return s.countAttemptOn(ctx, op, name, s.throttleKeys(name, remote), remote, now)
}

// countAttemptOn is countAttempt on the keys given, the first being the
// user's.
func (s *Service) countAttemptOn(ctx context.Context, op, name string, keys []throttleKey, remote string, now time.Time) (before, after []catalog.LoginThrottle, err error) {
	var locked *LockedError
	err = s.store.UpdateAccess(ctx, func(tx catalog.AccessTx) error {
		before, after, locked = nil, nil, nil
		for _, k := range keys {
			l, err := tx.GetLoginThrottle(ctx, k.key)
			if errors.Is(err, catalog.ErrNotFound) {
				l, err = catalog.LoginThrottle{Key: k.key}, nil
			}
			if err != nil {
				return err
			}
			next, isLocked := k.policy.attempt(l, now)
			if isLocked && (locked == nil || l.LockedUntil.After(locked.Until)) {
				locked = &LockedError{Until: l.LockedUntil, Address: k.address, now: now}
			}
			before, after = append(before, l), append(after, next)
		}
		if locked != nil {
			// Refused before any work: nothing is counted.
			return tx.AppendAudit(ctx, []catalog.AuditRecord{s.loginAudit(ctx, tx, op, name, remote, now, locked)})
		}
		for _, l := range after {
			if err := tx.PutLoginThrottle(ctx, l); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("sign-in: %w", err)
	}
	if locked != nil {
		return nil, nil, locked
	}
	return before, after, nil
}

// settleAttempt undoes what countAttempt counted for an attempt that
// succeeded: the user's count is cleared, the address's loses this one
// attempt (and the lock it set, unless a later attempt set another).
func settleAttempt(ctx context.Context, tx catalog.AccessTx, before, after []catalog.LoginThrottle) error {
	for i := range after {
		if i == 0 { // the user key
			if err := tx.DeleteLoginThrottle(ctx, after[i].Key); err != nil {
				return err
			}
			continue
		}
		cur, err := tx.GetLoginThrottle(ctx, after[i].Key)
		if errors.Is(err, catalog.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		cur.Failures = max(cur.Failures-1, 0)
		if cur.LockedUntil.Equal(after[i].LockedUntil) {
			cur.LockedUntil = before[i].LockedUntil
		}
		if cur.Failures == 0 && cur.LockedUntil.IsZero() {
			err = tx.DeleteLoginThrottle(ctx, cur.Key)
		} else {
			err = tx.PutLoginThrottle(ctx, cur)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// loginAudit is the record of a failed or refused sign-in. It names the
// user only when one by that name exists: the name field sometimes
// receives a password, which must not be recorded.
func (s *Service) loginAudit(ctx context.Context, r catalog.AccessReader, op, name, remote string, now time.Time, err error) catalog.AuditRecord {
	rec := s.auditRecord(nil, op, AccessPath, err)
	rec.Time, rec.RemoteAddr = now, remote
	if _, gerr := r.GetUser(ctx, name); gerr == nil {
		rec.User, rec.Object = name, userObject(name)
	}
	rec.Detail = realmDetail(signInRealm(ctx))
	return rec
}

// checkPassword verifies a typed user name and password with the same
// argon2id work whether the user exists, has a password, or is enabled.
// It returns the user when all is well.
func (s *Service) checkPassword(ctx context.Context, name, password string) (catalog.User, bool, error) {
	u, err := s.store.GetUser(ctx, name)
	if err != nil && !errors.Is(err, catalog.ErrNotFound) {
		return u, false, err
	}
	exists := err == nil
	hash := s.dummyHash
	if exists && u.PasswordHash != "" {
		hash = u.PasswordHash
	}
	match, _, verr := passhash.Verify(hash, password)
	if verr != nil {
		return u, false, fmt.Errorf("user %s: %w", name, verr)
	}
	return u, exists && u.PasswordHash != "" && u.Realm == "" && u.Enabled && match, nil
}

// Login signs a user in with a password and opens a session. A failure is
// errBadCredentials (wrapping ErrUnauthenticated), or a *LockedError
// (ErrLocked) saying when to try again; both are audited.
func (s *Service) Login(ctx context.Context, req LoginRequest) (*NewSession, error) {
	r, name, err := s.passwordRealm(ctx, req)
	if err != nil || r != nil {
		if err != nil {
			return nil, err
		}
		return s.loginRealm(ctx, r, name, req)
	}
	now := s.now()
	before, after, err := s.countAttempt(ctx, "login", name, req.RemoteAddr, now)
	if err != nil {
		return nil, err
	}
	u, ok, err := s.checkPassword(ctx, name, req.Password)
	if err != nil || !ok {
		if err == nil {
			err = errBadCredentials
		}
		aerr := s.store.AppendAudit(ctx, []catalog.AuditRecord{s.loginAudit(ctx, s.store, "login", name, req.RemoteAddr, now, err)})
		if Class(err) == "internal" || aerr != nil {
			return nil, errors.Join(err, aerr)
		}
		return nil, errBadCredentials
	}
	// A hash made with weaker costs than today's is made again, now that
	// the password is at hand.
	rehash := ""
	if p, _, _, err := passhash.Parse(u.PasswordHash); err == nil && p.WeakerThan(s.o.Hash) {
		rehash = passhash.Hash(req.Password, s.o.Hash)
	}
	id := randomHex(secretBytes)
	idBytes, _ := ParseSessionCookie(id)
	sess := catalog.Session{IDSHA256: secretHash(idBytes), User: name, CreatedAt: now, LastSeenAt: now,
		ExpiresAt: now.Add(s.o.SessionLifetime), RemoteAddr: req.RemoteAddr}
	var subject *Subject
	err = s.store.UpdateAccess(ctx, func(tx catalog.AccessTx) error {
		cur, err := tx.GetUser(ctx, name)
		if err != nil || cur.PasswordHash != u.PasswordHash || !cur.Enabled {
			// Changed, disabled or deleted while the password was
			// checked: the password checked is not the one in force.
			return errBadCredentials
		}
		if err := settleAttempt(ctx, tx, before, after); err != nil {
			return err
		}
		cur.LastLoginAt = now
		if rehash != "" {
			cur.PasswordHash = rehash
		}
		if err := tx.UpdateUser(ctx, cur); err != nil {
			return err
		}
		acl, err := tx.ListACL(ctx, catalog.ACLFilter{User: name})
		if err != nil {
			return err
		}
		if sess.Pending, err = s.pendingAfterPassword(ctx, tx, name, acl); err != nil {
			return err
		}
		if err := tx.InsertSession(ctx, sess); err != nil {
			return err
		}
		subject = NewSubject(name, "", acl)
		subject.SessionID, subject.Pending = sess.IDSHA256, sess.Pending
		rec := s.auditRecord(subject, "login", userObject(name), nil)
		rec.RemoteAddr, rec.Detail = req.RemoteAddr, realmDetail("")
		return tx.AppendAudit(ctx, []catalog.AuditRecord{rec})
	})
	if errors.Is(err, errBadCredentials) {
		return nil, s.auditFailure(ctx, nil, "login", AccessPath, req.RemoteAddr, errBadCredentials)
	}
	if err != nil {
		return nil, fmt.Errorf("sign-in: %w", err)
	}
	return &NewSession{Cookie: id, User: name, ExpiresAt: sess.ExpiresAt, Subject: subject, Pending: sess.Pending}, nil
}

// Logout ends the session of a cookie. Ending an ended session is not an
// error.
func (s *Service) Logout(ctx context.Context, cookie, remote string) error {
	id, err := ParseSessionCookie(cookie)
	if err != nil {
		return nil // nothing to end
	}
	h := secretHash(id)
	err = s.store.UpdateAccess(ctx, func(tx catalog.AccessTx) error {
		sess, err := tx.GetSession(ctx, h)
		if errors.Is(err, catalog.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := tx.DeleteSession(ctx, h); err != nil {
			return err
		}
		rec := s.auditRecord(&Subject{User: sess.User}, "logout", userObject(sess.User), nil)
		rec.RemoteAddr = remote
		return tx.AppendAudit(ctx, []catalog.AuditRecord{rec})
	})
	if err != nil {
		return fmt.Errorf("sign-out: %w", err)
	}
	return nil
}
