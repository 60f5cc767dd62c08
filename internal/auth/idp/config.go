package idp

import (
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/coffer-backup/coffer/internal/auth/autherr"
)

// Identity is who a realm says signed in: the user's name, and the
// groups (LDAP) or claim values (OIDC) its roles are mapped from.
type Identity struct {
	Name   string
	Groups []string
}

// ReadSecret is a secret given in the file or, better, in a file of its
// own (trailing newline dropped).
func ReadSecret(key, inline, file string) (string, error) {
	if inline != "" && file != "" {
		return "", fmt.Errorf("%w: %s and %s-file exclude each other", autherr.ErrInvalid, key, key)
	}
	if file == "" {
		return inline, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%w: %s-file: %v", autherr.ErrInvalid, key, err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// ReadCAFile reads a PEM file of CAs (nil, the system's, without one).
func ReadCAFile(path string) (*x509.CertPool, error) {
	if path == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: ca-file: %v", autherr.ErrInvalid, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: ca-file %s holds no PEM certificate", autherr.ErrInvalid, path)
	}
	return roots, nil
}

// CheckURL parses a URL of one of schemes.
func CheckURL(key, raw string, schemes ...string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err == nil && u.Host != "" {
		for _, s := range schemes {
			if u.Scheme == s {
				return u, nil
			}
		}
	}
	return nil, fmt.Errorf("%w: %s %q: want a URL like %s://host", autherr.ErrInvalid, key, raw, schemes[0])
}
