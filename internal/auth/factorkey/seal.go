package factorkey

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
)

// sealPrefix names the sealing scheme of a stored seed.
const sealPrefix = "v1:"

// Seal encrypts a TOTP seed of user with key (AES-256-GCM; the user's
// name is bound as associated data, so a seed moved to another user's row
// does not open).
func Seal(key []byte, user string, plain []byte) (string, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out := aead.Seal(nonce, nonce, plain, []byte(user))
	return sealPrefix + base64.RawStdEncoding.EncodeToString(out), nil
}

// Open decrypts what Seal made for user.
func Open(key []byte, user, sealed string) ([]byte, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	b64, ok := strings.CutPrefix(sealed, sealPrefix)
	raw, derr := base64.RawStdEncoding.DecodeString(b64)
	if !ok || derr != nil || len(raw) < aead.NonceSize() {
		return nil, fmt.Errorf("the TOTP seed of %s is not sealed as coffer seals it", user)
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], []byte(user))
	if err != nil {
		return nil, fmt.Errorf("the TOTP seed of %s does not open with this server's second-factor key "+
			"(a key file from another server?): remove the user's TOTP and enrol again", user)
	}
	return plain, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("second-factor key: %w", err)
	}
	return cipher.NewGCM(block)
}
