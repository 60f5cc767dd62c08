package fleet

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// A worker token is a worker's own credential to the catalog:
// "cwt1.<name>.<secret>", the secret 32 random bytes in base64url. The
// name says which PostgreSQL role it logs in as (catalog.WorkerRole), the
// secret is that role's password. "cwt1" versions the format.
const tokenPrefix = "cwt1."

// ErrBadToken refuses a worker token that is not one.
var ErrBadToken = errors.New("fleet: not a worker token")

// NewToken makes a worker token for name and returns it with its secret.
func NewToken(name string) (token, secret string, err error) {
	if err := CheckCredentialName(name); err != nil {
		return "", "", err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	secret = base64.RawURLEncoding.EncodeToString(b)
	return tokenPrefix + name + "." + secret, secret, nil
}

// CheckCredentialName refuses a name that cannot have a credential: a
// worker name whose role fits PostgreSQL's 63 bytes.
func CheckCredentialName(name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if len(name) > catalog.MaxWorkerRoleName {
		return fmt.Errorf("fleet: worker %s cannot have a credential: its role %s would be longer than PostgreSQL's 63 bytes (at most %d characters)",
			name, catalog.WorkerRole(name), catalog.MaxWorkerRoleName)
	}
	return nil
}

// ParseToken reads a worker token (surrounding space, a file's newline,
// is ignored). Its errors never repeat the token.
func ParseToken(token string) (name, secret string, err error) {
	token = strings.TrimSpace(token)
	rest, ok := strings.CutPrefix(token, tokenPrefix)
	if !ok {
		return "", "", fmt.Errorf("%w: a worker token starts with %q (coffer workers token create NAME makes one)", ErrBadToken, tokenPrefix)
	}
	name, secret, ok = strings.Cut(rest, ".")
	if !ok || CheckName(name) != nil {
		return "", "", fmt.Errorf("%w: a worker token is cwt1.<worker name>.<secret>", ErrBadToken)
	}
	if b, err := base64.RawURLEncoding.DecodeString(secret); err != nil || len(b) != 32 {
		return "", "", fmt.Errorf("%w: the secret of worker %s's token is not 32 bytes of base64url (truncated when copied?)", ErrBadToken, name)
	}
	return name, secret, nil
}

// WorkerDSN is the catalog's address (a postgres:// URL without
// credentials) with the worker's role and password from its token.
func WorkerDSN(address, token string) (dsn, name string, err error) {
	name, secret, err := ParseToken(token)
	if err != nil {
		return "", "", err
	}
	u, err := url.Parse(address)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", "", fmt.Errorf("%w: a worker with a token needs the catalog's postgres:// address", catalog.ErrNeedsPostgres)
	}
	if u.User != nil {
		return "", "", fmt.Errorf("fleet: with a worker token, give the catalog's address without a user or password (postgres://%s%s): the token is the credential",
			u.Host, u.EscapedPath())
	}
	q := u.Query()
	for _, k := range []string{"user", "password", "passfile"} {
		if q.Has(k) {
			return "", "", fmt.Errorf("fleet: with a worker token, the catalog's address may not set %s: the token is the credential", k)
		}
	}
	u.User = url.UserPassword(catalog.WorkerRole(name), secret)
	return u.String(), name, nil
}
