package auth

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"github.com/coffer-backup/coffer/internal/auth/idp"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// OIDCConfig is an OpenID Connect realm: the browser is sent to the
// provider (authorization code flow with PKCE), and its ID token names
// the user and, in RolesClaim, the values mapped to roles.
type OIDCConfig struct {
	// Issuer is the provider's issuer URL (its discovery document is
	// Issuer/.well-known/openid-configuration): https, or http on a
	// loopback address only.
	Issuer string `yaml:"issuer"`
	// ClientID and its secret (better in ClientSecretFile; none for a
	// public client) are coffer's registration at the provider, whose
	// redirect URI is PUBLIC-URL/auth/oidc/REALM/callback.
	ClientID         string `yaml:"client-id"`
	ClientSecret     string `yaml:"client-secret"`
	ClientSecretFile string `yaml:"client-secret-file"`
	// Scopes are asked besides openid (default: profile, email, groups).
	Scopes []string `yaml:"scopes"`
	// UsernameClaim names the user (default preferred_username); its
	// value, lower-cased, must be a valid coffer user name.
	UsernameClaim string `yaml:"username-claim"`
	// RolesClaim holds the values (a string or a list of strings) that
	// roles map (default groups).
	RolesClaim string `yaml:"roles-claim"`

	secret string
}

func (c *OIDCConfig) check() error {
	u, err := idp.CheckURL("issuer", c.Issuer, "https", "http")
	if err != nil {
		return err
	}
	if ip := net.ParseIP(u.Hostname()); u.Scheme == "http" && u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("%w: issuer %s: plain http is for a provider on a loopback address only", ErrInvalid, c.Issuer)
	}
	if c.ClientID == "" {
		return fmt.Errorf("%w: client-id is required", ErrInvalid)
	}
	if c.secret, err = idp.ReadSecret("client-secret", c.ClientSecret, c.ClientSecretFile); err != nil {
		return err
	}
	if len(c.Scopes) == 0 {
		c.Scopes = []string{"profile", "email", "groups"}
	}
	c.UsernameClaim = cmp.Or(c.UsernameClaim, "preferred_username")
	c.RolesClaim = cmp.Or(c.RolesClaim, "groups")
	return nil
}

// oidcRealm is an OIDC realm's provider, discovered at its first use (and
// again after a failed discovery): a provider down when the server starts
// does not stop it.
type oidcRealm struct {
	cfg    *RealmConfig
	client *http.Client
	mu     sync.Mutex
	p      *oidc.Provider
}

func newOIDCRealm(cfg *RealmConfig) *oidcRealm {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: cfg.roots, MinVersion: tls.VersionTLS12}
	return &oidcRealm{cfg: cfg, client: &http.Client{Transport: tr, Timeout: 15 * time.Second}}
}

// ctx carries the realm's HTTP client to go-oidc and oauth2.
func (o *oidcRealm) ctx(ctx context.Context) context.Context {
	return oidc.ClientContext(ctx, o.client)
}

func (o *oidcRealm) provider(ctx context.Context) (*oidc.Provider, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.p != nil {
		return o.p, nil
	}
	p, err := oidc.NewProvider(o.ctx(ctx), o.cfg.OIDC.Issuer)
	if err != nil {
		return nil, fmt.Errorf("realm %s: discover the provider %s: %w", o.cfg.Name, o.cfg.OIDC.Issuer, err)
	}
	o.p = p
	return p, nil
}

func (o *oidcRealm) oauth2(p *oidc.Provider, callback string) *oauth2.Config {
	return &oauth2.Config{ClientID: o.cfg.OIDC.ClientID, ClientSecret: o.cfg.OIDC.secret, Endpoint: p.Endpoint(),
		RedirectURL: callback, Scopes: append([]string{oidc.ScopeOpenID}, o.cfg.OIDC.Scopes...)}
}

// identity verifies the ID token of an exchange (signature, issuer,
// audience, expiry, nonce) and reads the user's name and role values.
func (o *oidcRealm) identity(ctx context.Context, p *oidc.Provider, tok *oauth2.Token, nonce string) (idp.Identity, error) {
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return idp.Identity{}, errorf(ErrUnauthenticated, "the provider of realm %s sent no ID token", o.cfg.Name)
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: o.cfg.OIDC.ClientID}).Verify(o.ctx(ctx), raw)
	if err != nil {
		return idp.Identity{}, errorf(ErrUnauthenticated, "realm %s: the ID token is not valid: %v", o.cfg.Name, err)
	}
	if idt.Nonce != nonce {
		return idp.Identity{}, errorf(ErrUnauthenticated, "realm %s: the ID token is not for this sign-in (nonce)", o.cfg.Name)
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return idp.Identity{}, errorf(ErrUnauthenticated, "realm %s: the ID token's claims: %v", o.cfg.Name, err)
	}
	name, _ := claims[o.cfg.OIDC.UsernameClaim].(string)
	name = normalizeUserName(name)
	if checkUserName(name) != nil {
		return idp.Identity{}, errorf(ErrUnauthenticated, "realm %s: the ID token's %s %q is not a coffer user name "+
			"(lower-case letters, digits, '.', '_', '-'): choose another username-claim", o.cfg.Name, o.cfg.OIDC.UsernameClaim, name)
	}
	return idp.Identity{Name: name, Groups: claimValues(claims[o.cfg.OIDC.RolesClaim])}, nil
}

// claimValues reads a claim that is a string or a list of strings.
func claimValues(v any) []string {
	switch v := v.(type) {
	case string:
		return strings.Fields(v)
	case []any:
		var out []string
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
