// Package fingerprint writes and reads the SHA-256 fingerprint of a
// certificate, by which a client trusts a coffer server's (self-signed)
// certificate: coffer server prints it with Format, the remote command
// line pins it with Parse. Both ends are faces that share nothing else
// but the API, so the format lives here rather than in either.
package fingerprint

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Format writes the SHA-256 of a DER certificate as openssl x509
// -fingerprint -sha256 does: upper-case hex pairs joined by colons.
func Format(der []byte) string {
	sum := sha256.Sum256(der)
	h := strings.ToUpper(hex.EncodeToString(sum[:]))
	var parts []string
	for i := 0; i < len(h); i += 2 {
		parts = append(parts, h[i:i+2])
	}
	return strings.Join(parts, ":")
}

// Parse reads a SHA-256 fingerprint written with or without colons, in
// either case, with or without a "sha256:" prefix.
func Parse(s string) ([]byte, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimPrefix(t, "sha256:")
	t = strings.ReplaceAll(t, ":", "")
	b, err := hex.DecodeString(t)
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("%q is not a SHA-256 fingerprint (64 hex digits, colons allowed), as coffer server prints it", s)
	}
	return b, nil
}
