// Package auth is coffer's access control: users with argon2id passwords,
// API tokens, browser sessions, PBS-style roles and ACL paths with
// Veeam's backup/restore split, login throttling, first-run setup links
// and the audit log, all stored in the catalog (catalog.AccessStore).
//
// It is a library; internal/server wires it in (docs/design/server.md,
// "Access control"):
//
//	subject, err := a.AuthenticateRequest(ctx, r)  // Authorization: Bearer, or the session cookie
//	if !auth.Allowed(subject, op.Object(r), op.Privilege) { ... 403, audited ... }
//	ctx = auth.WithSubject(ctx, subject)
//
// Self-service (changing one's password, one's own tokens) and the
// management of users, tokens and ACL entries check their rules here, with
// the acting Subject passed in; every change is audited in the same
// transaction that makes it.
package auth

import (
	"context"
	"fmt"
	"github.com/coffer-backup/coffer/internal/auth/passhash"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// Options tune a Service; zero fields take the defaults.
type Options struct {
	// Now is the clock (tests inject one).
	Now func() time.Time
	// Hash are the argon2id costs of new password hashes (at least
	// DefaultHashParams).
	Hash HashParams
	// UserThrottle and AddressThrottle limit failed sign-ins.
	UserThrottle    ThrottlePolicy
	AddressThrottle ThrottlePolicy
	// SessionIdle ends a session not used for that long (default 30
	// minutes); SessionLifetime ends it that long after sign-in
	// whatever its use (default 8 hours).
	SessionIdle     time.Duration
	SessionLifetime time.Duration
	// MaxTokenLifetime bounds an API token's expiry (default 365 days).
	MaxTokenLifetime time.Duration
	// SetupLinkLifetime is how long a one-time setup link stays valid
	// (default 1 hour).
	SetupLinkLifetime time.Duration
	// SecondFactorKey seals TOTP seeds in the catalog
	// (factorkey.Load); without it TOTP is neither enrolled nor
	// checked.
	SecondFactorKey []byte
	// RequireSecondFactor are the roles whose users must sign in with a
	// second factor (the server's configuration defaults it to
	// DefaultRequireSecondFactor); a user who has one must use it
	// whatever the roles.
	RequireSecondFactor []Role
	// Issuer names the server in authenticator apps (default "coffer").
	Issuer string
	// Realms are the sign-in realms besides coffer's own users
	// (NewRealms; nil: none).
	Realms *Realms
}

// DefaultRequireSecondFactor are the roles that must use a second factor
// unless the server's configuration says otherwise: those that can delete backups
// (Admin) or the repositories holding them (RepositoryAdmin), what an
// attacker who stole a password goes for first.
var DefaultRequireSecondFactor = []Role{RoleAdmin, RoleRepositoryAdmin}

// Defaults.
const (
	DefaultSessionIdle       = 30 * time.Minute
	DefaultSessionLifetime   = 8 * time.Hour
	DefaultMaxTokenLifetime  = 365 * 24 * time.Hour
	DefaultSetupLinkLifetime = time.Hour
)

// Service is the access control of one server over its catalog. It is
// safe for concurrent use and keeps no state of its own beyond a dummy
// hash: every server sharing the catalog sees the same users, sessions
// and throttles.
type Service struct {
	store catalog.AccessStore
	o     Options
	// dummyHash is checked when the user typed does not exist, so that
	// an unknown name costs the same argon2id work as a wrong password.
	dummyHash string
}

// New returns the access control over store.
func New(store catalog.AccessStore, o Options) (*Service, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Hash == (HashParams{}) {
		o.Hash = DefaultHashParams
	}
	if err := checkHashParams(o.Hash); err != nil {
		return nil, err
	}
	if o.UserThrottle == (ThrottlePolicy{}) {
		o.UserThrottle = DefaultUserThrottle
	}
	if o.AddressThrottle == (ThrottlePolicy{}) {
		o.AddressThrottle = DefaultAddressThrottle
	}
	for _, p := range []ThrottlePolicy{o.UserThrottle, o.AddressThrottle} {
		if p.Free < 1 || p.Base <= 0 || p.Max < p.Base || p.Forget <= 0 {
			return nil, fmt.Errorf("%w: login throttle %+v: want Free >= 1, 0 < Base <= Max, Forget > 0", ErrInvalid, p)
		}
	}
	o.SessionIdle = cmpOr(o.SessionIdle, DefaultSessionIdle)
	o.SessionLifetime = cmpOr(o.SessionLifetime, DefaultSessionLifetime)
	o.MaxTokenLifetime = cmpOr(o.MaxTokenLifetime, DefaultMaxTokenLifetime)
	o.SetupLinkLifetime = cmpOr(o.SetupLinkLifetime, DefaultSetupLinkLifetime)
	if o.Issuer == "" {
		o.Issuer = "coffer"
	}
	if k := len(o.SecondFactorKey); k != 0 && k != SecondFactorKeyBytes {
		return nil, fmt.Errorf("%w: the second-factor key has %d bytes, want %d", ErrInvalid, k, SecondFactorKeyBytes)
	}
	if o.SessionIdle > o.SessionLifetime {
		return nil, fmt.Errorf("%w: session idle timeout %s is longer than its lifetime %s", ErrInvalid, o.SessionIdle, o.SessionLifetime)
	}
	return &Service{store: store, o: o, dummyHash: passhash.Hash(randomHex(secretBytes), o.Hash)}, nil
}

func cmpOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// now is the clock in the catalog's precision.
func (s *Service) now() time.Time { return s.o.Now().UTC().Truncate(time.Microsecond) }

// Prune removes expired and idle sessions, expired setup links and login
// throttles quiet for longer than they remember; the server calls it now
// and then (an expired row is refused anyway, this only reclaims space).
func (s *Service) Prune(ctx context.Context) (int64, error) {
	now := s.now()
	return s.store.PruneAccess(ctx, catalog.AccessPrune{
		Now:               now,
		SessionIdleBefore: now.Add(-s.o.SessionIdle),
		ThrottleBefore:    now.Add(-max(s.o.UserThrottle.Forget, s.o.AddressThrottle.Forget)),
	})
}

// auditRecord starts the audit record of an operation by actor.
func (s *Service) auditRecord(actor *Subject, op, object string, err error) catalog.AuditRecord {
	r := catalog.AuditRecord{Time: s.now(), Operation: op, Object: object, Result: catalog.AuditOK}
	if actor != nil {
		r.User, r.TokenID = actor.User, actor.TokenID
	}
	switch Class(err) {
	case "":
	case "denied", "unauthenticated", "locked":
		r.Result, r.ErrorClass = catalog.AuditDenied, Class(err)
	default:
		r.Result, r.ErrorClass = catalog.AuditError, Class(err)
	}
	return r
}

// auditFailure records a refused or failed change (a successful one is
// recorded in its own transaction). A failure to record is returned
// joined to the original error: the caller's answer stays the original.
func (s *Service) auditFailure(ctx context.Context, actor *Subject, op, object, remote string, err error) error {
	r := s.auditRecord(actor, op, object, err)
	r.RemoteAddr = remote
	if aerr := s.store.AppendAudit(ctx, []catalog.AuditRecord{r}); aerr != nil {
		return fmt.Errorf("%w (and the audit record of it failed: %v)", err, aerr)
	}
	return err
}
