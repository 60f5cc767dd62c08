// Package factorkey keeps the server's second-factor key: the key that
// seals TOTP seeds in the catalog (internal/auth), so that a copy of the
// catalog (a backup of it, a PostgreSQL dump) holds no seed anyone can
// compute codes from. The key lives in the server's state directory,
// readable by the server's user alone, never in the catalog and never in
// a log.
package factorkey

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/coffer-backup/coffer/internal/statefile"
)

// Bytes is the size of the key (AES-256).
const Bytes = 32

// File is where a server keeps its key, below its state directory.
func File(stateDir string) string {
	return filepath.Join(stateDir, "server", "second-factor.key")
}

// Load reads the key at path, or makes one there (mode 0600) when there
// is none. Two processes making it at once agree on one: the file is
// written aside and linked into place, which fails when another got
// there first, whose key is then read.
func Load(path string) ([]byte, error) {
	key, err := readKey(path)
	if !errors.Is(err, os.ErrNotExist) {
		return key, err
	}
	key = make([]byte, Bytes)
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
	if len(key) != Bytes {
		return nil, fmt.Errorf("second-factor key %s: %d bytes, want %d: restore the file from the server's backup "+
			"(without it, every TOTP enrolment must be made again)", path, len(key), Bytes)
	}
	return key, nil
}
