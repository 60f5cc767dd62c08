package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// Authenticating a request: an API token in "Authorization: Bearer", or
// the browser's session cookie. The server's middleware calls
// AuthenticateRequest, then Allowed with the operation's privilege and
// object, and passes the subject on with WithSubject.

var (
	errNoCredentials = errorf(ErrUnauthenticated,
		"sign in, or send an API token as \"Authorization: Bearer coffer_...\"")
	errSessionEnded = errorf(ErrUnauthenticated, "the session has ended (signed out, timed out or replaced): sign in again")
	errBadToken     = errorf(ErrUnauthenticated, "unknown or revoked API token: create a new one (coffer token create)")
)

// touchEvery is how stale a session's last-seen (a token's last-used)
// time may get before a request writes it again: a write per request
// would cost more than the precision is worth. Idle timeouts are
// therefore exact to within this much.
func (s *Service) touchEvery() time.Duration { return min(s.o.SessionIdle/10, time.Minute) }

// AuthenticateRequest authenticates r by its Authorization header, or
// else its session cookie.
func (s *Service) AuthenticateRequest(ctx context.Context, r *http.Request) (*Subject, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		tok, err := ParseBearer(h)
		if err != nil {
			return nil, err
		}
		return s.AuthenticateToken(ctx, tok)
	}
	if c, err := r.Cookie(SessionCookieName); err == nil {
		return s.AuthenticateSession(ctx, c.Value)
	}
	return nil, errNoCredentials
}

// AuthenticateSession checks a session cookie: the session exists, is
// neither idle for SessionIdle nor older than SessionLifetime, and its
// user is enabled. The session is looked up by the SHA-256 of its ID, so
// the lookup's timing says nothing about the ID itself.
func (s *Service) AuthenticateSession(ctx context.Context, cookie string) (*Subject, error) {
	id, err := ParseSessionCookie(cookie)
	if err != nil {
		return nil, err
	}
	h := secretHash(id)
	sess, err := s.store.GetSession(ctx, h)
	if errors.Is(err, catalog.ErrNotFound) {
		return nil, errSessionEnded
	}
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	now := s.now()
	if !now.Before(sess.ExpiresAt) || now.Sub(sess.LastSeenAt) >= s.o.SessionIdle ||
		(sess.Pending != "" && now.Sub(sess.CreatedAt) >= PendingLifetime) {
		if err := s.endSession(ctx, h); err != nil {
			return nil, err
		}
		return nil, errSessionEnded
	}
	u, err := s.store.GetUser(ctx, sess.User)
	if errors.Is(err, catalog.ErrNotFound) || (err == nil && !u.Enabled) {
		return nil, errSessionEnded
	}
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	if now.Sub(sess.LastSeenAt) >= s.touchEvery() {
		if err := s.store.TouchSession(ctx, h, now); err != nil {
			return nil, err
		}
	}
	subject, err := s.subject(ctx, sess.User, "")
	if err != nil {
		return nil, err
	}
	subject.SessionID, subject.Pending = h, sess.Pending
	return subject, nil
}

func (s *Service) endSession(ctx context.Context, h string) error {
	return s.store.UpdateAccess(ctx, func(tx catalog.AccessTx) error {
		_, err := tx.DeleteSession(ctx, h)
		return err
	})
}

// AuthenticateToken checks an API token: it exists, its secret matches
// (compared in constant time), it has not expired, and its user is
// enabled.
func (s *Service) AuthenticateToken(ctx context.Context, token string) (*Subject, error) {
	id, secret, err := ParseAPIToken(token)
	if err != nil {
		return nil, err
	}
	t, err := s.store.GetAPIToken(ctx, id)
	if errors.Is(err, catalog.ErrNotFound) {
		return nil, errBadToken
	}
	if err != nil {
		return nil, fmt.Errorf("API token: %w", err)
	}
	if !sameHash(t.SecretSHA256, secretHash(secret)) {
		return nil, errBadToken
	}
	now := s.now()
	if !now.Before(t.ExpiresAt) {
		return nil, errorf(ErrUnauthenticated, "API token %s expired at %s: create a new one (coffer token create)",
			id, t.ExpiresAt.Format(time.RFC3339))
	}
	u, err := s.store.GetUser(ctx, t.User)
	if err != nil && !errors.Is(err, catalog.ErrNotFound) {
		return nil, fmt.Errorf("API token: %w", err)
	}
	if err != nil || !u.Enabled {
		return nil, errorf(ErrUnauthenticated, "API token %s belongs to a disabled user", id)
	}
	if now.Sub(t.LastUsedAt) >= s.touchEvery() {
		if err := s.store.TouchAPIToken(ctx, id, now); err != nil {
			return nil, err
		}
	}
	return s.subject(ctx, t.User, id)
}

// subject reads the ACL entries of a user (and its token).
func (s *Service) subject(ctx context.Context, user, tokenID string) (*Subject, error) {
	acl, err := s.store.ListACL(ctx, catalog.ACLFilter{User: user})
	if err != nil {
		return nil, err
	}
	return NewSubject(user, tokenID, acl), nil
}

// SessionCookie is the cookie that carries a new session: Secure,
// HttpOnly, SameSite=Lax, host-only (the __Host- prefix), for the whole
// site, ending when the session's lifetime does. Cross-site requests that
// change state are refused by http.CrossOriginProtection in the server,
// not by the cookie alone.
func SessionCookie(ns *NewSession) *http.Cookie {
	return &http.Cookie{Name: SessionCookieName, Value: ns.Cookie, Path: "/", Expires: ns.ExpiresAt,
		Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode}
}

// ClearSessionCookie is the cookie that removes the session cookie from
// the browser (sent with the answer to a sign-out).
func ClearSessionCookie() *http.Cookie {
	return &http.Cookie{Name: SessionCookieName, Value: "", Path: "/", MaxAge: -1, Secure: true, HttpOnly: true,
		SameSite: http.SameSiteLaxMode}
}

type subjectKey struct{}

// WithSubject returns ctx carrying the authenticated subject.
func WithSubject(ctx context.Context, s *Subject) context.Context {
	return context.WithValue(ctx, subjectKey{}, s)
}

// SubjectFrom returns the subject WithSubject put in ctx, or nil (which
// is allowed nothing).
func SubjectFrom(ctx context.Context) *Subject {
	s, _ := ctx.Value(subjectKey{}).(*Subject)
	return s
}
