package auth

import (
	"fmt"
)

// OIDCConfig is an OpenID Connect realm: the browser is sent to the
// provider (authorization code flow with PKCE), and its ID token names
// the user and, in RolesClaim, the values mapped to roles.
type OIDCConfig struct {
	// Issuer is the provider's issuer URL (its discovery document is
	// Issuer/.well-known/openid-configuration).
	Issuer string `yaml:"issuer"`
	// ClientID and its secret (better in ClientSecretFile; none for a
	// public client) are coffer's registration at the provider, whose
	// redirect URI is PUBLIC-URL/auth/oidc/REALM/callback.
	ClientID         string `yaml:"client-id"`
	ClientSecret     string `yaml:"client-secret"`
	ClientSecretFile string `yaml:"client-secret-file"`
	// Scopes are asked besides openid (default: profile, email).
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
	if _, err := checkURL("issuer", c.Issuer, "https", "http"); err != nil {
		return err
	}
	if c.ClientID == "" {
		return fmt.Errorf("%w: client-id is required", ErrInvalid)
	}
	var err error
	if c.secret, err = readSecret("client-secret", c.ClientSecret, c.ClientSecretFile); err != nil {
		return err
	}
	if len(c.Scopes) == 0 {
		c.Scopes = []string{"profile", "email"}
	}
	c.UsernameClaim = cmpOrString(c.UsernameClaim, "preferred_username")
	c.RolesClaim = cmpOrString(c.RolesClaim, "groups")
	return nil
}

// oidcRealm is an OIDC realm's provider, discovered at its first use.
type oidcRealm struct {
	cfg *RealmConfig
}

func newOIDCRealm(cfg *RealmConfig) *oidcRealm { return &oidcRealm{cfg: cfg} }
