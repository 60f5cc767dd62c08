package api

import "time"

// The documents of access control: sign-in, accounts, API tokens, ACL
// entries and the audit log. No document ever holds a password, a
// session cookie or a token's secret, except NewToken, once.

// LoginRequest signs in with a password; the answer sets the session
// cookie.
type LoginRequest struct {
	User     string `json:"user" minLength:"1" maxLength:"1024"`
	Password string `json:"password" maxLength:"1024" writeOnly:"true"`
	// Realm names the sign-in realm that checks the password ("local":
	// coffer's own users); without it, the user's own realm (or
	// "name@realm" in user).
	Realm string `json:"realm,omitempty" maxLength:"64" doc:"the sign-in realm (default: the user's own, or the one named as user@realm)"`
}

// Session is a signed-in browser session (its secret is in the cookie
// alone).
type Session struct {
	User      string    `json:"user"`
	ExpiresAt time.Time `json:"expires_at"`
	// Pending is what the session lacks before it may do anything: its
	// second step ("second-factor": POST /access/second-factor with a
	// code) or the enrolment of a second factor ("enrolment"); absent
	// for a full session.
	Pending string `json:"pending,omitempty" enum:"second-factor,enrolment"`
}

// Caller is who sends a request: a user, through a session or one of
// its API tokens.
type Caller struct {
	User    string `json:"user"`
	TokenID string `json:"token_id,omitempty"`
	// Pending: the session still lacks its second step or an enrolment
	// (as Session.Pending).
	Pending string `json:"pending,omitempty" enum:"second-factor,enrolment"`
}

// SetupRequest uses a one-time setup link to choose a password.
type SetupRequest struct {
	Token    string `json:"token" minLength:"1" maxLength:"200" writeOnly:"true"`
	Password string `json:"password" maxLength:"1024" writeOnly:"true"`
}

// SetupDone names the user whose password a setup link set.
type SetupDone struct {
	User string `json:"user"`
}

// User is an account.
type User struct {
	Name              string    `json:"name"`
	Enabled           bool      `json:"enabled"`
	HasPassword       bool      `json:"has_password"`
	CreatedAt         time.Time `json:"created_at"`
	PasswordChangedAt time.Time `json:"password_changed_at,omitzero"`
	LastLoginAt       time.Time `json:"last_login_at,omitzero"`
	Realm             string    `json:"realm" doc:"the sign-in realm that checks the user's password: local (coffer's own), or a configured LDAP, Active Directory or OpenID Connect realm"`
}

// CreateUserRequest creates an account: with a password, or (without one)
// with a one-time setup link for its owner.
type CreateUserRequest struct {
	Name     string `json:"name" minLength:"1" maxLength:"64"`
	Password string `json:"password,omitempty" maxLength:"1024" writeOnly:"true"`
}

// SetupLink is a one-time link for a user to choose a password; Link is
// the server's /ui/setup page with the token in its fragment.
type SetupLink struct {
	User  string `json:"user"`
	Token string `json:"token,omitempty"`
	Link  string `json:"link,omitempty"`
}

// PasswordRequest changes a password: one's own needs the old one.
type PasswordRequest struct {
	Old string `json:"old,omitempty" maxLength:"1024" writeOnly:"true"`
	New string `json:"new" maxLength:"1024" writeOnly:"true"`
}

// Grant is a role on an ACL path.
type Grant struct {
	Path      string `json:"path" minLength:"1" maxLength:"1024"`
	Role      string `json:"role" enum:"Admin,Auditor,BackupOperator,RestoreOperator,RepositoryAdmin,PolicyEditor,NoAccess"`
	Propagate bool   `json:"propagate,omitempty"`
}

// TokenRequest creates an API token. A token holds what both its grants
// and its user's rights allow; without grants it can do nothing.
type TokenRequest struct {
	User            string  `json:"user,omitempty" maxLength:"64" doc:"the owner (default: whoever asks)"`
	Comment         string  `json:"comment,omitempty" maxLength:"200"`
	LifetimeSeconds float64 `json:"lifetime_seconds" minimum:"1"`
	Grants          []Grant `json:"grants" required:"false" maxItems:"100"`
}

// Token is an API token as listed (never its secret).
type Token struct {
	ID         string    `json:"id"`
	User       string    `json:"user"`
	Comment    string    `json:"comment,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	LastUsedAt time.Time `json:"last_used_at,omitzero"`
	Grants     []Grant   `json:"grants"`
}

// NewToken is a created token: Token is the credential, shown this once.
type NewToken struct {
	Token string `json:"token"`
	Info  Token  `json:"info"`
}

// ACLEntry is a role of a user, or of one of its API tokens, on a path.
type ACLEntry struct {
	Path      string `json:"path" minLength:"1" maxLength:"1024"`
	User      string `json:"user" minLength:"1" maxLength:"64"`
	TokenID   string `json:"token_id,omitempty" maxLength:"64"`
	Role      string `json:"role" enum:"Admin,Auditor,BackupOperator,RestoreOperator,RepositoryAdmin,PolicyEditor,NoAccess"`
	Propagate bool   `json:"propagate,omitempty"`
}

// AuditRecord is one line of the audit log.
type AuditRecord struct {
	ID         int64     `json:"id"`
	Time       time.Time `json:"time"`
	User       string    `json:"user,omitempty"`
	TokenID    string    `json:"token_id,omitempty"`
	Operation  string    `json:"operation"`
	Object     string    `json:"object,omitempty"`
	Result     string    `json:"result"` // ok, denied, error
	ErrorClass string    `json:"error_class,omitempty"`
	RemoteAddr string    `json:"remote_addr,omitempty"`
	Detail     string    `json:"detail,omitempty"`
}
