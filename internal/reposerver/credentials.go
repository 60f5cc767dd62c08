package reposerver

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"github.com/coffer-backup/coffer/internal/statefile"
	"go.yaml.in/yaml/v3"
)

// Credential is one client of the server: a server or worker of coffer,
// named, with one right. The server keeps only the secret's SHA-256: a
// secret is 32 random bytes, so a plain hash is enough (nothing to guess
// by brute force, unlike a password).
type Credential struct {
	Name   string `yaml:"name"`
	Right  Right  `yaml:"right"`
	SHA256 string `yaml:"sha256"`
}

// credentialsFile is the server's credentials file.
type credentialsFile struct {
	Credentials []Credential `yaml:"credentials"`
}

// secretPrefix marks a repository server's secret, so that a leaked one
// is recognisable (secret scanners) and never confused with a password.
const secretPrefix = "coffer-repo-"

// NewSecret makes a credential's secret and its hash.
func NewSecret() (secret, sum string) {
	var b [32]byte
	_, _ = rand.Read(b[:])
	secret = secretPrefix + hex.EncodeToString(b[:])
	return secret, hashSecret(secret)
}

func hashSecret(secret string) string {
	s := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(s[:])
}

// LoadCredentials reads a credentials file.
func LoadCredentials(path string) ([]Credential, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	var f credentialsFile
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("credentials %s: %w", path, err)
	}
	seen := map[string]bool{}
	for i, c := range f.Credentials {
		if c.Name == "" || seen[c.Name] {
			return nil, fmt.Errorf("credentials %s: entry %d: a credential needs a name of its own", path, i+1)
		}
		seen[c.Name] = true
		if _, err := ParseRight(string(c.Right)); err != nil {
			return nil, fmt.Errorf("credentials %s: %s: %w", path, c.Name, err)
		}
		if b, err := hex.DecodeString(c.SHA256); err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("credentials %s: %s: sha256 must be 64 hex digits", path, c.Name)
		}
	}
	return f.Credentials, nil
}

// AddCredential adds a credential to the file (created if missing) and
// returns its secret, which is shown once and stored nowhere. The file
// is replaced atomically.
func AddCredential(path, name string, right Right) (string, error) {
	var creds []Credential
	if _, err := os.Stat(path); err == nil {
		if creds, err = LoadCredentials(path); err != nil {
			return "", err
		}
	}
	for _, c := range creds {
		if c.Name == name {
			return "", fmt.Errorf("credential %s exists already: remove it first", name)
		}
	}
	secret, sum := NewSecret()
	creds = append(creds, Credential{Name: name, Right: right, SHA256: sum})
	return secret, writeCredentials(path, creds)
}

// RemoveCredential removes a credential: it is refused from the next
// request on (the server rereads the file on SIGHUP or restart).
func RemoveCredential(path, name string) error {
	creds, err := LoadCredentials(path)
	if err != nil {
		return err
	}
	kept := creds[:0]
	for _, c := range creds {
		if c.Name != name {
			kept = append(kept, c)
		}
	}
	if len(kept) == len(creds) {
		return fmt.Errorf("no credential named %s", name)
	}
	return writeCredentials(path, kept)
}

func writeCredentials(path string, creds []Credential) error {
	raw, err := yaml.Marshal(credentialsFile{Credentials: creds})
	if err != nil {
		return err
	}
	if err := statefile.WriteFile(path, raw, 0o600); err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	return nil
}
