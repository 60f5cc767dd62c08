// Package securitykey makes WebAuthn security keys and passkeys a second
// factor of coffer's users (github.com/go-webauthn/webauthn). A key is
// registered in a browser (the console's Account page): the server sends
// a challenge, the key signs it, the server keeps the key's public key
// in the catalog. At sign-in, after the password, the key signs a new
// challenge in place of a TOTP code. Each ceremony's challenge is kept
// server-side in the browser's session (the catalog's sessions.challenge)
// between its two steps, and used once.
//
// The relying party is the server's address as browsers reach it
// (server.public-url, else the address it listens on): its host name is
// the relying party's ID and its scheme://host:port the one origin
// accepted. Browsers refuse WebAuthn at an IP address: a server reached
// as https://192.0.2.7:8443 needs a public-url with a name.
package securitykey

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/auth/autherr"
	"github.com/coffer-backup/coffer/internal/catalog"
)

// The operations' names in the audit log.
const (
	OpRegister = "register-security-key"
	OpRemove   = "remove-security-key"
)

// The kinds of ceremony a session holds.
const (
	ceremonyRegistration = "registration"
	ceremonySignIn       = "sign-in"
)

// MaxNameLen bounds the name a user gives a key.
const MaxNameLen = 64

// Keys are the security keys of the users of one access control, for one
// relying party.
type Keys struct {
	access *auth.Service
	wa     *webauthn.WebAuthn
	err    error // why there is no relying party (wa nil)
}

// New returns the keys of access for the server reached at serverURL
// (empty: keys can be listed and removed, not registered or used).
func New(access *auth.Service, serverURL string) *Keys {
	k := &Keys{access: access}
	u, err := url.Parse(serverURL)
	if serverURL == "" || err != nil || u.Hostname() == "" {
		k.err = autherr.Errorf(autherr.ErrInvalid, "a security key is registered and used through the server, in a browser: "+
			"the command line lists and removes keys (coffer account key)")
		return k
	}
	k.wa, err = webauthn.New(&webauthn.Config{RPID: u.Hostname(), RPDisplayName: "coffer",
		RPOrigins: []string{u.Scheme + "://" + u.Host}})
	if err != nil {
		k.err = fmt.Errorf("security keys at %s: %w", serverURL, err)
	}
	return k
}

// user is a coffer user as the WebAuthn library sees one.
type user struct {
	name  string
	creds []webauthn.Credential
}

// WebAuthnID is the user handle: a hash of the name (a second factor
// names its user before the key is asked, so the handle is never looked
// up), the same for every key of the user.
func (u user) WebAuthnID() []byte {
	h := sha256.Sum256([]byte("coffer user\x00" + u.name))
	return h[:]
}

func (u user) WebAuthnName() string                       { return u.name }
func (u user) WebAuthnDisplayName() string                { return u.name }
func (u user) WebAuthnCredentials() []webauthn.Credential { return u.creds }

// load reads the stored credentials of a user.
func load(name string, rows []catalog.WebAuthnCredential) (user, error) {
	u := user{name: name}
	for _, r := range rows {
		var c webauthn.Credential
		if err := json.Unmarshal(r.Credential, &c); err != nil {
			return u, fmt.Errorf("security key %s of %s: %w", r.ID, name, err)
		}
		u.creds = append(u.creds, c)
	}
	return u, nil
}

// ceremony is what a session keeps between a ceremony's two steps.
type ceremony struct {
	Kind    string               `json:"kind"`
	Session webauthn.SessionData `json:"session"`
}

func (k *Keys) keep(ctx context.Context, actor *auth.Subject, name, kind string, s *webauthn.SessionData) error {
	data, err := json.Marshal(ceremony{Kind: kind, Session: *s})
	if err != nil {
		return err
	}
	return k.access.SetCeremony(ctx, actor, name, string(data), kind == ceremonyRegistration)
}

// ceremonyOf reads the ceremony of kind a session holds.
func ceremonyOf(sess catalog.Session, kind string) (webauthn.SessionData, error) {
	var c ceremony
	if sess.Challenge == "" || json.Unmarshal([]byte(sess.Challenge), &c) != nil || c.Kind != kind {
		return webauthn.SessionData{}, autherr.Errorf(autherr.ErrUnauthenticated,
			"no security-key %s is under way in this session: start again", kind)
	}
	return c.Session, nil
}

// keysOf reads the keys of name as the actor may see them.
func (k *Keys) keysOf(ctx context.Context, actor *auth.Subject, name string) (user, error) {
	st, err := k.access.SecondFactors(ctx, actor, name)
	if err != nil {
		return user{}, err
	}
	return load(name, st.Keys)
}

// checkName refuses a key's name nobody could read back.
func checkName(name string) error {
	if !utf8.ValidString(name) || len(name) > MaxNameLen || strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return autherr.Errorf(autherr.ErrInvalid, "a security key's name is up to %d printable characters", MaxNameLen)
	}
	return nil
}

// keyID is how a credential's ID is stored and shown.
func keyID(raw []byte) string { return base64.RawURLEncoding.EncodeToString(raw) }

func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// detail says why the WebAuthn library refused an answer.
func detail(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.DevInfo != "" {
		return pe.Details + " (" + pe.DevInfo + ")"
	}
	return err.Error()
}
