package auth

import (
	"crypto/x509"
	"fmt"
	"github.com/coffer-backup/coffer/internal/auth/idp"
	"reflect"
	"regexp"
)

// RealmConfig is one entry of the configuration file's realms: section: a
// directory or an identity provider that checks the credentials of its
// users (docs/guide-realms.md). Its users are created in the catalog at
// their first sign-in, belong to it alone, and get their roles from it at
// every sign-in.
type RealmConfig struct {
	// Name is how sign-ins and users name the realm (lower case, as a
	// user name; "local" is coffer's own users).
	Name string `yaml:"name"`
	// Type is ldap, active-directory or oidc.
	Type string `yaml:"type"`
	// Default makes the realm the one a typed name that is no user yet
	// signs in with when the sign-in names none (at most one realm).
	Default bool `yaml:"default"`
	// Comment is shown on the sign-in page's button of an OIDC realm.
	Comment string `yaml:"comment"`
	// CAFile is a PEM file of the CAs trusted for the directory's or the
	// provider's certificate (default: the system's).
	CAFile string `yaml:"ca-file"`

	LDAP idp.LDAP   `yaml:",inline"`
	OIDC OIDCConfig `yaml:",inline"`

	// Roles map the realm's groups (LDAP) or claim values (OIDC) to
	// grants; a user given no grant by them cannot sign in.
	Roles []RoleMapping `yaml:"roles"`

	roots *x509.CertPool
}

// RoleMapping grants Role on Path (default /, and below it unless
// Propagate is false) to the realm's users in Group (an LDAP group's DN or
// cn) or whose roles claim holds Value.
type RoleMapping struct {
	Group     string `yaml:"group"`
	Value     string `yaml:"value"`
	Role      string `yaml:"role"`
	Path      string `yaml:"path"`
	Propagate *bool  `yaml:"propagate"`
}

// The realm types.
const (
	RealmLDAP            = "ldap"
	RealmActiveDirectory = "active-directory"
	RealmOIDC            = "oidc"
	// LocalRealm names coffer's own users (stored as "" in the catalog).
	LocalRealm = "local"
)

var realmNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// check validates a realm's configuration, fills in its defaults and
// reads its secret files.
func (c *RealmConfig) check() error {
	if !realmNameRE.MatchString(c.Name) || c.Name == LocalRealm {
		return fmt.Errorf("%w: realm name %q: use 1 to 32 lower-case letters, digits or '-', starting with a letter "+
			"(%q is coffer's own users)", ErrInvalid, c.Name, LocalRealm)
	}
	var err error
	if c.roots, err = idp.ReadCAFile(c.CAFile); err != nil {
		return fmt.Errorf("realm %s: %w", c.Name, err)
	}
	switch c.Type {
	case RealmLDAP, RealmActiveDirectory:
		if !reflect.ValueOf(c.OIDC).IsZero() {
			return fmt.Errorf("%w: realm %s: issuer, client-id and the other OIDC keys are for type oidc", ErrInvalid, c.Name)
		}
		err = c.LDAP.Check(c.Type == RealmActiveDirectory, c.roots)
	case RealmOIDC:
		if !reflect.ValueOf(c.LDAP).IsZero() {
			return fmt.Errorf("%w: realm %s: url, bind-dn and the other LDAP keys are for types ldap and active-directory",
				ErrInvalid, c.Name)
		}
		err = c.OIDC.check()
	default:
		err = fmt.Errorf("%w: type %q: want ldap, active-directory or oidc", ErrInvalid, c.Type)
	}
	if err != nil {
		return fmt.Errorf("realm %s: %w", c.Name, err)
	}
	if len(c.Roles) == 0 {
		return fmt.Errorf("%w: realm %s: roles: map at least one group or claim value to a role, "+
			"or nobody of the realm could do anything", ErrInvalid, c.Name)
	}
	for i := range c.Roles {
		if err := c.Roles[i].check(c.Type == RealmOIDC); err != nil {
			return fmt.Errorf("realm %s: roles[%d]: %w", c.Name, i, err)
		}
	}
	return nil
}

func (m *RoleMapping) check(oidc bool) error {
	switch {
	case oidc && (m.Value == "" || m.Group != ""):
		return fmt.Errorf("%w: an OIDC realm maps a claim's value: give value, not group", ErrInvalid)
	case !oidc && (m.Group == "" || m.Value != ""):
		return fmt.Errorf("%w: an LDAP realm maps a group: give group (its DN or cn), not value", ErrInvalid)
	}
	if _, err := ParseRole(m.Role); err != nil {
		return err
	}
	if m.Path == "" {
		m.Path = "/"
	}
	p, err := ParsePath(m.Path)
	if err != nil {
		return err
	}
	m.Path = p
	return nil
}

// propagates is whether the grant holds below its path too (default yes).
func (m RoleMapping) propagates() bool { return m.Propagate == nil || *m.Propagate }

// CheckRealms validates the realms: section (names unique, at most one
// default) and reads the files it names. The server calls it at start, so
// that a mistake is an error there rather than at someone's sign-in.
func CheckRealms(cs []RealmConfig) error {
	seen, defaults := map[string]bool{}, 0
	for i := range cs {
		if err := cs[i].check(); err != nil {
			return err
		}
		if seen[cs[i].Name] {
			return fmt.Errorf("%w: realm %s is configured twice", ErrInvalid, cs[i].Name)
		}
		seen[cs[i].Name] = true
		if cs[i].Default {
			defaults++
		}
	}
	if defaults > 1 {
		return fmt.Errorf("%w: realms: at most one realm is the default", ErrInvalid)
	}
	return nil
}
