package auth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/coffer-backup/coffer/internal/statefile"
)

// The server's second-factor key seals TOTP seeds in the catalog: a copy
// of the catalog (a backup of it, a PostgreSQL dump) holds no seed anyone
// can compute codes from. The key lives in the server's state directory,
// readable by the server's user alone, never in the catalog and never in
// a log.

// SecondFactorKeyBytes is the size of the key (AES-256).
const SecondFactorKeyBytes = 32

// SecondFactorKeyFile is where a server keeps its key, below its state
// directory.
func SecondFactorKeyFile(stateDir string) string {
	return filepath.Join(stateDir, "server", "second-factor.key")
}

// LoadSecondFactorKey reads the key at path, or makes one there (mode
// 0600) when there is none. Two processes making it at once agree on one:
// the file is written aside and linked into place, which fails when
// another got there first, whose key is then read.
func LoadSecondFactorKey(path string) ([]byte, error) {
	key, err := readKey(path)
	if !errors.Is(err, os.ErrNotExist) {
		return key, err
	}
	key = make([]byte, SecondFactorKeyBytes)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	if err := statefile.WriteFile(tmp, key, 0o600); err != nil {
		return nil, fmt.Errorf("second-factor key: %w", err)
	}
	defer func() { _ = os.Remove(tmp) }()
	if err := os.Link(tmp, path); errors.Is(err, os.ErrExist) {
		return readKey(path)
	} else if err != nil {
		return nil, fmt.Errorf("second-factor key: %w", err)
	}
	if err := statefile.SyncDir(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("second-factor key: %w", err)
	}
	return key, nil
}

func readKey(path string) ([]byte, error) {
	key, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(key) != SecondFactorKeyBytes {
		return nil, fmt.Errorf("second-factor key %s: %d bytes, want %d: restore the file from the server's backup "+
			"(without it, every TOTP enrolment must be made again)", path, len(key), SecondFactorKeyBytes)
	}
	return key, nil
}

// sealPrefix names the sealing scheme of a stored seed.
const sealPrefix = "v1:"

// errNoKey refuses TOTP where the access control was given no key.
var errNoKey = errorf(ErrInvalid, "TOTP needs the server's second-factor key: enrol through the server, "+
	"or run this command on the server's host with its state directory")

// seal encrypts a seed for user (AES-256-GCM; the user's name is bound
// as associated data, so a seed moved to another user's row does not open).
func (s *Service) seal(user string, plain []byte) (string, error) {
	aead, err := s.aead()
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

// open decrypts what seal made for user.
func (s *Service) open(user, sealed string) ([]byte, error) {
	aead, err := s.aead()
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

func (s *Service) aead() (cipher.AEAD, error) {
	if len(s.o.SecondFactorKey) == 0 {
		return nil, errNoKey
	}
	block, err := aes.NewCipher(s.o.SecondFactorKey)
	if err != nil {
		return nil, fmt.Errorf("second-factor key: %w", err)
	}
	return cipher.NewGCM(block)
}
