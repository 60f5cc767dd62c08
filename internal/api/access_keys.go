package api

// The documents of security keys (WebAuthn): a ceremony's options for the
// browser, and the key's answer to them. A key is registered and used in
// a browser; the command line lists (second-factors) and removes them.

// SecurityKeyOptions are a WebAuthn ceremony's options: PublicKey is
// what the browser's navigator.credentials.create (a registration) or
// .get (a sign-in) takes as its publicKey member, binary fields in
// base64url.
type SecurityKeyOptions struct {
	PublicKey map[string]any `json:"public_key"`
}

// SecurityKeyRegistration is a new key's answer to a registration, and
// the name the user gives it.
type SecurityKeyRegistration struct {
	Name string `json:"name" maxLength:"64"`
	// Credential is the browser's PublicKeyCredential as JSON
	// (PublicKeyCredential.toJSON()).
	Credential map[string]any `json:"credential"`
}

// SecurityKeyAnswer is a key's answer to a sign-in's challenge: the
// browser's PublicKeyCredential as JSON.
type SecurityKeyAnswer struct {
	Credential map[string]any `json:"credential"`
}
