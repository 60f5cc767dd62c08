package api

import "time"

// The documents of second factors: what a user has enrolled, a TOTP
// enrolment, recovery codes, and the second step of a sign-in. Secrets
// appear once: a TOTP seed in its enrolment, recovery codes when they are
// made.

// SecondFactors is what a user has enrolled.
type SecondFactors struct {
	User string `json:"user"`
	// TOTP is a confirmed TOTP app; TOTPPending one enrolled and waiting
	// for its first code.
	TOTP        bool `json:"totp"`
	TOTPPending bool `json:"totp_pending"`
	// RecoveryCodes is how many unused recovery codes are left.
	RecoveryCodes int `json:"recovery_codes"`
	// SecurityKeys are the WebAuthn credentials (security keys, passkeys).
	SecurityKeys []SecurityKey `json:"security_keys"`
	// Required: the user's roles must sign in with a second factor
	// (server.require-second-factor).
	Required bool `json:"required"`
}

// SecurityKey is a WebAuthn credential of a user (its public key stays
// on the server).
type SecurityKey struct {
	ID         string    `json:"id"`
	Name       string    `json:"name"`
	CreatedAt  time.Time `json:"created_at"`
	LastUsedAt time.Time `json:"last_used_at,omitzero"`
}

// TOTPEnrolment is a TOTP seed waiting for its first code: type Secret
// into an authenticator app, or have it read URI (an otpauth:// URI) or
// the same as a QR code (QRCodePNG, base64). Shown this once.
type TOTPEnrolment struct {
	User      string `json:"user"`
	Secret    string `json:"secret"`
	URI       string `json:"uri"`
	QRCodePNG []byte `json:"qr_code_png"`
}

// CodeRequest carries a code: a TOTP code, or a recovery code where the
// operation takes one.
type CodeRequest struct {
	Code string `json:"code" minLength:"1" maxLength:"64" writeOnly:"true"`
}

// RecoveryCodes are one-time codes, each replacing the second factor
// once; shown this once, kept by the server as hashes only.
type RecoveryCodes struct {
	User  string   `json:"user"`
	Codes []string `json:"codes"`
}
