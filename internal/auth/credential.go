package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"
)

// The secrets coffer hands out, each written in one canonical spelling
// (lower-case hex) so that parsing and formatting are exact inverses:
//
//	API token     coffer_<16 hex: ID>_<64 hex: secret>
//	session       <64 hex> in the cookie SessionCookieName
//	setup link    coffersetup_<64 hex>
//
// The catalog keeps the hex SHA-256 of each secret: they are 256 random
// bits, so a fast hash is enough (nothing to guess), and a copy of the
// catalog holds nothing that signs anyone in. Parse errors never repeat
// the input: it may be a secret.

const (
	tokenPrefix  = "coffer_"
	setupPrefix  = "coffersetup_"
	tokenIDBytes = 8
	secretBytes  = 32
	// SessionCookieName is the browser session's cookie. The __Host-
	// prefix makes browsers accept it only with Secure, Path=/ and no
	// Domain, so no other host or plain-HTTP page can set or shadow it.
	SessionCookieName = "__Host-coffer-session"
)

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // never returns an error on Linux
	}
	return hex.EncodeToString(b)
}

// secretHash is the stored form of a secret: hex SHA-256 of its bytes.
func secretHash(secret []byte) string {
	h := sha256.Sum256(secret)
	return hex.EncodeToString(h[:])
}

// sameHash compares two stored hashes in constant time.
func sameHash(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// parseHex decodes exactly n bytes of lower-case hex.
func parseHex(s string, n int) ([]byte, bool) {
	if len(s) != 2*n {
		return nil, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return nil, false
		}
	}
	b, err := hex.DecodeString(s)
	return b, err == nil
}

// FormatAPIToken writes a token in its one spelling.
func FormatAPIToken(id string, secret []byte) string {
	return tokenPrefix + id + "_" + hex.EncodeToString(secret)
}

// ParseAPIToken splits coffer_<id>_<secret>.
func ParseAPIToken(s string) (id string, secret []byte, err error) {
	bad := errorf(ErrUnauthenticated, "malformed API token: expected coffer_<16 hex digits>_<64 hex digits>")
	rest, ok := strings.CutPrefix(s, tokenPrefix)
	if !ok {
		return "", nil, bad
	}
	id, sec, ok := strings.Cut(rest, "_")
	if !ok {
		return "", nil, bad
	}
	if _, ok := parseHex(id, tokenIDBytes); !ok {
		return "", nil, bad
	}
	secret, ok = parseHex(sec, secretBytes)
	if !ok {
		return "", nil, bad
	}
	return id, secret, nil
}

// ParseBearer takes the credentials of an Authorization header:
// "Bearer <token>" (the scheme in any case, RFC 9110).
func ParseBearer(header string) (string, error) {
	scheme, cred, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || cred == "" || strings.ContainsAny(cred, " \t") {
		return "", errorf(ErrUnauthenticated, "malformed Authorization header: expected \"Bearer coffer_...\"")
	}
	return cred, nil
}

// ParseSessionCookie decodes the session cookie's value.
func ParseSessionCookie(v string) ([]byte, error) {
	id, ok := parseHex(v, secretBytes)
	if !ok {
		return nil, errorf(ErrUnauthenticated, "malformed session cookie: sign in again")
	}
	return id, nil
}

// FormatSetupToken writes a setup link's token.
func FormatSetupToken(secret []byte) string { return setupPrefix + hex.EncodeToString(secret) }

// ParseSetupToken decodes coffersetup_<secret>.
func ParseSetupToken(s string) ([]byte, error) {
	rest, ok := strings.CutPrefix(s, setupPrefix)
	if ok {
		if secret, ok := parseHex(rest, secretBytes); ok {
			return secret, nil
		}
	}
	return nil, errorf(ErrInvalid, "malformed setup token: expected coffersetup_<64 hex digits>, as printed by coffer server init")
}
