package catalog

import (
	"context"
	"errors"
	"time"
)

// ErrConflict is returned when a row to be created already exists (a
// user, an API token ID, a session).
var ErrConflict = errors.New("catalog: already exists")

// The access-control records below are stored for internal/auth, which
// gives them their meaning (docs/design/server.md, "Access control"). The
// catalog keeps no secret that could be used as it is: passwords are
// argon2id PHC strings, API token secrets, session IDs and setup links are
// stored as the hex SHA-256 of the secret.

// User is an account that signs in with a password, here or in its realm.
type User struct {
	Name string
	// PasswordHash is an argon2id PHC string; empty while the user has
	// no password yet (a one-time setup link is pending).
	PasswordHash      string
	Enabled           bool
	CreatedAt         time.Time
	PasswordChangedAt time.Time
	LastLoginAt       time.Time
	// Realm is the sign-in realm that checks the user's credentials: ""
	// for coffer's own users (a password hash here), else the name of a
	// configured LDAP or OpenID Connect realm (no password here).
	Realm string
}

// APIToken is a credential for scripts: coffer_<ID>_<secret>.
type APIToken struct {
	ID           string
	User         string // the owner; the token holds at most the owner's rights
	SecretSHA256 string // hex
	Comment      string
	CreatedAt    time.Time
	ExpiresAt    time.Time // always set
	LastUsedAt   time.Time
}

// Session is a browser's signed-in session.
type Session struct {
	IDSHA256   string // hex SHA-256 of the session ID in the cookie
	User       string
	CreatedAt  time.Time
	LastSeenAt time.Time
	ExpiresAt  time.Time // absolute end, whatever the activity
	RemoteAddr string    // where it signed in
	// Pending is what the session still lacks before it is a full one
	// (PendingSecondFactor, PendingEnrolment); "" for a full session.
	Pending string
	// Challenge is the WebAuthn ceremony under way in the session (its
	// JSON), "" for none.
	Challenge string
}

// ACLEntry grants Role on Path (and below it when Propagate) to a user, or
// to one of the user's API tokens when TokenID is set.
type ACLEntry struct {
	Path      string
	User      string
	TokenID   string
	Role      string
	Propagate bool
}

// ACLFilter selects ACL entries; zero fields match everything.
type ACLFilter struct {
	User string // the user's entries and those of the user's tokens
	Path string
}

// SetupToken is a one-time link that lets a user set a password (the first
// administrator, or a user created without a password).
type SetupToken struct {
	SecretSHA256 string // hex
	User         string
	CreatedAt    time.Time
	ExpiresAt    time.Time
}

// LoginThrottle counts failed sign-ins for one key (a user or a remote
// address) and when the next attempt is allowed.
type LoginThrottle struct {
	Key           string
	Failures      int
	LastFailureAt time.Time
	LockedUntil   time.Time // zero: not locked
}

// Audit results.
const (
	AuditOK     = "ok"
	AuditDenied = "denied"
	AuditError  = "error"
)

// AuditRecord is one entry of the audit log. It never holds a secret.
type AuditRecord struct {
	ID         int64
	Time       time.Time
	User       string
	TokenID    string
	Operation  string // the operation's ID ("backup-policy", "login", ...)
	Object     string // the ACL path of the object ("/policies/nightly")
	Result     string // AuditOK, AuditDenied or AuditError
	ErrorClass string // with AuditError and AuditDenied: "denied", "invalid", "locked"...
	RemoteAddr string
	// Detail says what an access change changed ("user bob: role
	// BackupOperator, propagating"), in words written by internal/auth
	// from names, roles and paths only.
	Detail string
}

// AuditFilter selects audit records, newest first (by ID). Zero fields
// match everything; Object matches the path and everything below it.
// Paging: pass the ID of the last record of a page as BeforeID.
type AuditFilter struct {
	User      string
	TokenID   string
	Operation string
	Object    string
	Result    string
	Since     time.Time // inclusive
	Until     time.Time // exclusive
	BeforeID  int64
	Limit     int
}

// AccessPrune says what PruneAccess removes.
type AccessPrune struct {
	Now               time.Time // sessions and setup tokens that expired by now
	SessionIdleBefore time.Time // sessions not seen since
	ThrottleBefore    time.Time // throttle rows neither failing nor locked since
}

// AccessReader reads access-control records. Lists are ordered by their
// keys: users by name, tokens by user and ID, sessions by user and
// creation, ACL entries by path, user, token and role.
type AccessReader interface {
	GetUser(ctx context.Context, name string) (User, error)
	ListUsers(ctx context.Context) ([]User, error)
	GetAPIToken(ctx context.Context, id string) (APIToken, error)
	ListAPITokens(ctx context.Context, user string) ([]APIToken, error) // "" lists every user's
	GetSession(ctx context.Context, idSHA256 string) (Session, error)
	ListSessions(ctx context.Context, user string) ([]Session, error)
	ListACL(ctx context.Context, f ACLFilter) ([]ACLEntry, error)
	GetSetupToken(ctx context.Context, secretSHA256 string) (SetupToken, error)
	GetLoginThrottle(ctx context.Context, key string) (LoginThrottle, error)
	SecondFactorReader // secondfactor.go
}

// AccessTx is a write transaction on the access-control records. Creating
// a row that exists fails with ErrConflict; a row that refers to a missing
// user, and updates or deletes of missing rows, fail with ErrNotFound.
type AccessTx interface {
	AccessReader
	InsertUser(ctx context.Context, u User) error
	UpdateUser(ctx context.Context, u User) error
	// DeleteUser removes the user with its tokens, sessions, setup tokens
	// and ACL entries; audit records stay.
	DeleteUser(ctx context.Context, name string) error
	InsertAPIToken(ctx context.Context, t APIToken) error
	// DeleteAPIToken removes the token and its ACL entries.
	DeleteAPIToken(ctx context.Context, id string) error
	InsertSession(ctx context.Context, s Session) error
	// DeleteSession removes a session; an absent one is not an error
	// (signing out twice), deleted says whether there was one.
	DeleteSession(ctx context.Context, idSHA256 string) (deleted bool, err error)
	// DeleteSessions removes the user's sessions except keep's.
	DeleteSessions(ctx context.Context, user, keep string) (int64, error)
	// PutACL adds the entry, or sets Propagate of the same (path, user,
	// token, role).
	PutACL(ctx context.Context, e ACLEntry) error
	DeleteACL(ctx context.Context, e ACLEntry) error // by (path, user, token, role)
	InsertSetupToken(ctx context.Context, s SetupToken) error
	DeleteSetupToken(ctx context.Context, secretSHA256 string) error
	DeleteSetupTokens(ctx context.Context, user string) error
	PutLoginThrottle(ctx context.Context, l LoginThrottle) error // upsert by key
	DeleteLoginThrottle(ctx context.Context, key string) error   // absent is not an error
	AppendAudit(ctx context.Context, records []AuditRecord) error
	SecondFactorTx // secondfactor.go
}

// AccessStore stores users, API tokens, sessions, ACL entries, setup
// links, login throttles and the audit log.
type AccessStore interface {
	AccessReader
	// UpdateAccess runs fn in one write transaction, ordered after every
	// other UpdateAccess on the database (every process and server), so
	// fn can read, decide and write without another writer in between.
	// fn may run more than once (a retried transaction): it must only
	// touch the database and values it recomputes.
	UpdateAccess(ctx context.Context, fn func(AccessTx) error) error
	// AppendAudit adds records outside UpdateAccess (the audit of
	// ordinary operations); a zero Time becomes now.
	AppendAudit(ctx context.Context, records []AuditRecord) error
	ListAudit(ctx context.Context, f AuditFilter) ([]AuditRecord, error)
	// TouchSession and TouchAPIToken move the last-seen (last-used) time
	// forward to at; an earlier at changes nothing.
	TouchSession(ctx context.Context, idSHA256 string, at time.Time) error
	TouchAPIToken(ctx context.Context, id string, at time.Time) error
	// PruneAccess removes expired sessions and setup tokens and forgotten
	// login throttles, and returns how many rows went.
	PruneAccess(ctx context.Context, p AccessPrune) (int64, error)
}
