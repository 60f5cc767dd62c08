package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"github.com/coffer-backup/coffer/internal/auth/idp"
	"net/http"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// An OIDC sign-in: StartOIDC sends the browser to the provider with a
// fresh state, nonce and PKCE challenge, and remembers them in a cookie
// that only this server can have written (an HMAC of a key it draws at
// start); FinishOIDC, at the redirect back, checks the state against the
// cookie, exchanges the code with the PKCE verifier, verifies the ID
// token and its nonce, and opens a session for the user it names. The
// flow is bounded in time and completes on the server that started it.

// OIDCFlowCookieName carries a started OIDC sign-in (host-only, like the
// session cookie).
const OIDCFlowCookieName = "__Host-coffer-oidc"

// oidcFlowLifetime bounds the time between the button and the return.
const oidcFlowLifetime = 10 * time.Minute

// oidcFlow is what the flow cookie remembers.
type oidcFlow struct {
	Realm    string `json:"r"`
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Next     string `json:"x"`
	Expires  int64  `json:"e"`
}

// OIDCStart is a started sign-in: send the browser to URL with Cookie.
type OIDCStart struct {
	URL    string
	Cookie *http.Cookie
}

// StartOIDC starts a sign-in through an OIDC realm whose provider sends
// the browser back to callback; next is where the console goes after.
func (s *Service) StartOIDC(ctx context.Context, realmName, callback, next string) (*OIDCStart, error) {
	r := s.realm(realmName)
	if r == nil || r.oidc == nil {
		return nil, errorf(ErrNotFound, "there is no OpenID Connect realm %q", realmName)
	}
	p, err := r.oidc.provider(ctx)
	if err != nil {
		return nil, err
	}
	f := oidcFlow{Realm: realmName, State: randomHex(secretBytes), Nonce: randomHex(secretBytes),
		Verifier: oauth2.GenerateVerifier(), Next: next, Expires: s.now().Add(oidcFlowLifetime).Unix()}
	u := r.oidc.oauth2(p, callback).AuthCodeURL(f.State, oauth2.S256ChallengeOption(f.Verifier),
		oauth2.SetAuthURLParam("nonce", f.Nonce))
	value, err := s.o.Realms.seal(f)
	if err != nil {
		return nil, err
	}
	return &OIDCStart{URL: u, Cookie: &http.Cookie{Name: OIDCFlowCookieName, Value: value, Path: "/",
		MaxAge: int(oidcFlowLifetime.Seconds()), Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode}}, nil
}

// OIDCReturn is the provider's redirect back: its query and the flow
// cookie.
type OIDCReturn struct {
	Realm, Callback string
	Query           map[string][]string
	Cookie          string
	RemoteAddr      string
}

// FinishOIDC completes a sign-in at the provider's redirect back. It
// returns the session and where the console goes next. Failed returns
// are throttled by the client's address (for the realm, and for every
// sign-in) and audited with the realm.
func (s *Service) FinishOIDC(ctx context.Context, ret OIDCReturn) (*NewSession, string, error) {
	r := s.realm(ret.Realm)
	if r == nil || r.oidc == nil {
		return nil, "", errorf(ErrNotFound, "there is no OpenID Connect realm %q", ret.Realm)
	}
	ctx = withSignInRealm(ctx, r.cfg.Name)
	now := s.now()
	// The name throttled is the realm at this address: no user is
	// known before the token is verified.
	key := "oidc " + r.cfg.Name + " " + addressThrottleKey(ret.RemoteAddr)
	before, after, err := s.countAttempt(ctx, "login", key, ret.RemoteAddr, now)
	if err != nil {
		return nil, "", err
	}
	f, id, err := s.oidcIdentity(ctx, r, ret)
	if err != nil {
		return nil, "", s.failRealmLogin(ctx, id.Name, ret.RemoteAddr, now, err)
	}
	ns, err := s.openRealmSession(ctx, r, id, ret.RemoteAddr, func(tx catalog.AccessTx) error {
		return settleAttempt(ctx, tx, before, after)
	})
	return ns, f.Next, err
}

// errOIDCReturn refuses a return that does not belong to a sign-in
// started here.
var errOIDCReturn = errorf(ErrUnauthenticated, "this sign-in was not started here, or took too long: start again")

func (s *Service) oidcIdentity(ctx context.Context, r *realm, ret OIDCReturn) (oidcFlow, idp.Identity, error) {
	f, err := s.o.Realms.open(ret.Cookie)
	q := func(k string) string {
		if v := ret.Query[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	switch {
	case err != nil || f.Realm != r.cfg.Name || s.now().Unix() > f.Expires ||
		!hmac.Equal([]byte(f.State), []byte(q("state"))):
		return f, idp.Identity{}, errOIDCReturn
	case q("error") != "":
		return f, idp.Identity{}, errorf(ErrUnauthenticated, "the provider of realm %s refused the sign-in: %.200s %.200s",
			r.cfg.Name, q("error"), q("error_description"))
	}
	p, err := r.oidc.provider(ctx)
	if err != nil {
		return f, idp.Identity{}, err
	}
	tok, err := r.oidc.oauth2(p, ret.Callback).Exchange(r.oidc.ctx(ctx), q("code"), oauth2.VerifierOption(f.Verifier))
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		return f, idp.Identity{}, errorf(ErrUnauthenticated, "realm %s: the provider refused the code: %.200s",
			r.cfg.Name, strings.TrimSpace(re.ErrorCode+" "+re.ErrorDescription))
	}
	if err != nil {
		return f, idp.Identity{}, err
	}
	id, err := r.oidc.identity(ctx, p, tok, f.Nonce)
	return f, id, err
}

// seal and open write and read the flow cookie: JSON, then an HMAC of it
// under the key drawn when the realms were made.
func (rs *Realms) seal(f oidcFlow) (string, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, rs.flowKey)
	m.Write(b)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(b) + "." + enc.EncodeToString(m.Sum(nil)), nil
}

func (rs *Realms) open(v string) (oidcFlow, error) {
	var f oidcFlow
	body, sig, ok := strings.Cut(v, ".")
	enc := base64.RawURLEncoding
	b, err := enc.DecodeString(body)
	got, serr := enc.DecodeString(sig)
	if !ok || err != nil || serr != nil {
		return f, errOIDCReturn
	}
	m := hmac.New(sha256.New, rs.flowKey)
	m.Write(b)
	if !hmac.Equal(m.Sum(nil), got) {
		return f, errOIDCReturn
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, errOIDCReturn
	}
	return f, nil
}

// newFlowKey is the key of a server's flow cookies.
func newFlowKey() []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return k
}
