package catalog

import (
	"context"
	"time"
)

// Second factors of local users (internal/auth gives them their meaning).
// None of these records holds a usable secret: a TOTP seed is sealed with
// the server's key, which the catalog never sees; a recovery code is
// stored as its SHA-256; a WebAuthn credential is a public key.

// What a session still lacks before it is a full one (Session.Pending).
const (
	PendingNothing      = ""
	PendingSecondFactor = "second-factor" // the password was right; the second step is to come
	PendingEnrolment    = "enrolment"     // the user's role must use a second factor, and it has none
)

// TOTPSecret is a user's TOTP (RFC 6238) seed.
type TOTPSecret struct {
	User string
	// Sealed is the seed sealed by internal/auth with the server's key.
	Sealed    string
	CreatedAt time.Time
	// ConfirmedAt is zero while the enrolment waits for its first code:
	// an unconfirmed seed is no second factor yet.
	ConfirmedAt time.Time
	// LastStep is the last time step whose code was accepted: a code is
	// accepted once, never again.
	LastStep int64
}

// RecoveryCode is a one-time code that replaces the second factor once.
type RecoveryCode struct {
	User       string
	CodeSHA256 string // hex
	CreatedAt  time.Time
	UsedAt     time.Time // zero: not used yet
}

// WebAuthnCredential is a security key or passkey of a user.
type WebAuthnCredential struct {
	ID   string // the credential ID, base64url without padding
	User string
	Name string // the user's name for it ("yubikey 5")
	// Credential is the JSON of the credential as the WebAuthn library
	// keeps it: the public key, the signature count, the flags.
	Credential []byte
	CreatedAt  time.Time
	LastUsedAt time.Time
}

// SecondFactorReader reads the second factors. Lists are ordered: recovery
// codes by their hash, credentials by creation.
type SecondFactorReader interface {
	GetTOTP(ctx context.Context, user string) (TOTPSecret, error)
	ListRecoveryCodes(ctx context.Context, user string) ([]RecoveryCode, error)
	ListWebAuthnCredentials(ctx context.Context, user string) ([]WebAuthnCredential, error)
}

// SecondFactorTx changes them in an access transaction (AccessTx).
type SecondFactorTx interface {
	// PutTOTP sets the user's seed (replacing any other).
	PutTOTP(ctx context.Context, s TOTPSecret) error
	// DeleteTOTP removes it; deleted says whether there was one.
	DeleteTOTP(ctx context.Context, user string) (deleted bool, err error)
	// ReplaceRecoveryCodes replaces every recovery code of the user.
	ReplaceRecoveryCodes(ctx context.Context, user string, codes []RecoveryCode) error
	// UseRecoveryCode marks an unused code used at at; false when the
	// user has no such unused code.
	UseRecoveryCode(ctx context.Context, user, codeSHA256 string, at time.Time) (bool, error)
	InsertWebAuthnCredential(ctx context.Context, c WebAuthnCredential) error
	// UpdateWebAuthnCredential writes Credential and LastUsedAt of the
	// credential c.ID of c.User.
	UpdateWebAuthnCredential(ctx context.Context, c WebAuthnCredential) error
	DeleteWebAuthnCredential(ctx context.Context, user, id string) (deleted bool, err error)
	// SetSessionState sets what a session still lacks and its WebAuthn
	// ceremony.
	SetSessionState(ctx context.Context, idSHA256, pending, challenge string) error
}
