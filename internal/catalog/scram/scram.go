// Package scram builds the password verifiers PostgreSQL stores for a
// role (SCRAM-SHA-256), so that coffer can give a worker's role its
// password without the password itself reaching the server's statement
// log. Hand-written: neither pgx nor the standard library exposes the
// verifier's construction, and it is a few lines of RFC 5802.
package scram

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
)

// Verifier is PostgreSQL's SCRAM-SHA-256 verifier of password
// (RFC 5802, 7677; PostgreSQL's scram_build_secret): the server stores
// and logs only this, never the password. The password is ASCII
// (the caller checks it), which SASLprep leaves as it is.
func Verifier(password string) (string, error) {
	const iterations = 4096
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	if err != nil {
		return "", err
	}
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	stored := sha256.Sum256(mac(salted, "Client Key"))
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iterations, b64(salt), b64(stored[:]), b64(mac(salted, "Server Key"))), nil
}
