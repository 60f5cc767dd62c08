// Package idp holds the identity providers that coffer's sign-in realms
// check credentials with (LDAP and Active Directory directories), and what
// their configurations share. Which users and roles follow from an
// identity is auth's business.
package idp

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"github.com/coffer-backup/coffer/internal/auth/autherr"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-ldap/ldap/v3"
)

// LDAP is an LDAP or Active Directory realm: coffer binds with a
// service account, finds the user's entry, refuses a disabled one, reads
// its groups, then binds as the user with the password typed.
type LDAP struct {
	// URL is ldaps://host[:636], or ldap://host[:389] with StartTLS: a
	// password never crosses the network in the clear.
	URL      string `yaml:"url"`
	StartTLS bool   `yaml:"start-tls"`
	// BindDN and its password (better in BindPasswordFile) are the
	// service account that searches the directory.
	BindDN           string `yaml:"bind-dn"`
	BindPassword     string `yaml:"bind-password"`
	BindPasswordFile string `yaml:"bind-password-file"`
	// UserBase is where users are searched (subtree) with UserFilter, in
	// which {user} is the name typed (default (uid={user}), and
	// (sAMAccountName={user}) for Active Directory).
	UserBase   string `yaml:"user-base"`
	UserFilter string `yaml:"user-filter"`
	// DisabledFilter matches the entries of disabled accounts, which are
	// refused (e.g. (pwdAccountLockedTime=*), or (employeeType=left)).
	// Active Directory's accounts whose userAccountControl has the
	// ACCOUNTDISABLE bit are refused whatever it says.
	DisabledFilter string `yaml:"disabled-filter"`
	// GroupBase is where the user's groups are searched with GroupFilter,
	// in which {dn} is the user's DN (default
	// (|(member={dn})(uniqueMember={dn})), and for Active Directory the
	// nested membership (member:1.2.840.113556.1.4.1941:={dn})). The
	// groups named by the entry's memberOf count too.
	GroupBase   string `yaml:"group-base"`
	GroupFilter string `yaml:"group-filter"`
	// Timeout bounds each exchange with the directory (default 10s).
	Timeout string `yaml:"timeout"`

	ad       bool
	password string
	tls      *tls.Config
	timeout  time.Duration
}

// adAccountDisabled is ACCOUNTDISABLE in Active Directory's
// userAccountControl.
const adAccountDisabled = 0x2

func (c *LDAP) Check(ad bool, roots *x509.CertPool) error {
	c.ad = ad
	u, err := CheckURL("url", c.URL, "ldaps", "ldap")
	if err != nil {
		return err
	}
	if u.Scheme == "ldap" && !c.StartTLS {
		return fmt.Errorf("%w: url %s is plain LDAP: use ldaps://, or set start-tls: true, so that passwords "+
			"do not cross the network in the clear", autherr.ErrInvalid, c.URL)
	}
	if u.Scheme == "ldaps" && c.StartTLS {
		return fmt.Errorf("%w: start-tls is for ldap:// URLs; ldaps:// is TLS already", autherr.ErrInvalid)
	}
	if c.UserBase == "" || c.BindDN == "" {
		return fmt.Errorf("%w: bind-dn and user-base are required", autherr.ErrInvalid)
	}
	if c.password, err = ReadSecret("bind-password", c.BindPassword, c.BindPasswordFile); err != nil {
		return err
	}
	c.UserFilter = cmp.Or(c.UserFilter, map[bool]string{false: "(uid={user})", true: "(sAMAccountName={user})"}[ad])
	c.GroupFilter = cmp.Or(c.GroupFilter,
		map[bool]string{false: "(|(member={dn})(uniqueMember={dn}))", true: "(member:1.2.840.113556.1.4.1941:={dn})"}[ad])
	for key, f := range map[string]string{"user-filter": c.UserFilter, "group-filter": c.GroupFilter, "disabled-filter": c.DisabledFilter} {
		if f == "" {
			continue
		}
		if _, err := ldap.CompileFilter(strings.NewReplacer("{user}", "x", "{dn}", "x").Replace(f)); err != nil {
			return fmt.Errorf("%w: %s %q: %v", autherr.ErrInvalid, key, f, err)
		}
	}
	c.timeout = 10 * time.Second
	if c.Timeout != "" {
		if c.timeout, err = time.ParseDuration(c.Timeout); err != nil || c.timeout <= 0 {
			return fmt.Errorf("%w: timeout %q: want a duration like 10s", autherr.ErrInvalid, c.Timeout)
		}
	}
	c.tls = &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12, RootCAs: roots}
	return nil
}

// errDirectory is a directory that could not be asked (down, refusing
// the service account, a bad certificate): an internal error, not the
// user's fault, and logged with its cause by the caller.
func errDirectory(realm string, err error) error {
	return fmt.Errorf("realm %s: the directory: %w", realm, err)
}

// Authenticate checks name and password against the directory. A user
// unknown, disabled or with a wrong password is autherr.BadCredentials.
func (c *LDAP) Authenticate(ctx context.Context, realm, name, password string) (Identity, error) {
	if password == "" {
		// An empty password is an unauthenticated bind, which LDAP
		// servers answer with success: never a sign-in.
		return Identity{}, autherr.BadCredentials
	}
	conn, err := c.dial(ctx)
	if err != nil {
		return Identity{}, errDirectory(realm, err)
	}
	defer func() { _ = conn.Close() }()
	if err := conn.Bind(c.BindDN, c.password); err != nil {
		return Identity{}, errDirectory(realm, fmt.Errorf("bind as %s: %w", c.BindDN, err))
	}
	entry, err := c.findUser(conn, name)
	if err != nil {
		return Identity{}, errDirectory(realm, err)
	}
	if entry == nil {
		return Identity{}, autherr.BadCredentials
	}
	if disabled, err := c.disabled(conn, entry); err != nil || disabled {
		return Identity{}, cmpOrErr(err, autherr.BadCredentials, realm)
	}
	groups, err := c.groups(conn, entry)
	if err != nil {
		return Identity{}, errDirectory(realm, err)
	}
	if err := conn.Bind(entry.DN, password); err != nil {
		if ldap.IsErrorWithCode(err, ldap.LDAPResultInvalidCredentials) {
			return Identity{}, autherr.BadCredentials
		}
		return Identity{}, errDirectory(realm, fmt.Errorf("bind as the user: %w", err))
	}
	return Identity{Name: name, Groups: groups}, nil
}

func cmpOrErr(err, otherwise error, realm string) error {
	if err != nil {
		return errDirectory(realm, err)
	}
	return otherwise
}

// dial connects over TLS (ldaps, or StartTLS before anything is sent).
func (c *LDAP) dial(ctx context.Context) (*ldap.Conn, error) {
	d := &net.Dialer{Timeout: c.timeout}
	if dl, ok := ctx.Deadline(); ok {
		d.Deadline = dl
	}
	conn, err := ldap.DialURL(c.URL, ldap.DialWithDialer(d), ldap.DialWithTLSConfig(c.tls))
	if err != nil {
		return nil, err
	}
	conn.SetTimeout(c.timeout)
	if c.StartTLS {
		if err := conn.StartTLS(c.tls); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("StartTLS: %w", err)
		}
	}
	return conn, nil
}

// findUser returns the one entry of name, or nil when there is none. Two
// entries are a directory to fix, not a sign-in to guess.
func (c *LDAP) findUser(conn *ldap.Conn, name string) (*ldap.Entry, error) {
	filter := strings.ReplaceAll(c.UserFilter, "{user}", ldap.EscapeFilter(name))
	res, err := conn.Search(ldap.NewSearchRequest(c.UserBase, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases, 2,
		int(c.timeout.Seconds()), false, filter, []string{"memberOf", "userAccountControl"}, nil))
	if ldap.IsErrorWithCode(err, ldap.LDAPResultSizeLimitExceeded) || (err == nil && len(res.Entries) > 1) {
		return nil, fmt.Errorf("user-filter %s finds more than one entry under %s", filter, c.UserBase)
	}
	if ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
		return nil, fmt.Errorf("user-base %s does not exist", c.UserBase)
	}
	if err != nil {
		return nil, fmt.Errorf("search %s: %w", filter, err)
	}
	if len(res.Entries) == 0 {
		return nil, nil
	}
	return res.Entries[0], nil
}

// disabled reports an account the directory has disabled: Active
// Directory's ACCOUNTDISABLE bit, or an entry that DisabledFilter matches.
func (c *LDAP) disabled(conn *ldap.Conn, entry *ldap.Entry) (bool, error) {
	if c.ad {
		uac, err := strconv.ParseInt(entry.GetAttributeValue("userAccountControl"), 10, 64)
		if err != nil {
			return false, fmt.Errorf("%s has no readable userAccountControl: %w", entry.DN, err)
		}
		if uac&adAccountDisabled != 0 {
			return true, nil
		}
	}
	if c.DisabledFilter == "" {
		return false, nil
	}
	res, err := conn.Search(ldap.NewSearchRequest(entry.DN, ldap.ScopeBaseObject, ldap.NeverDerefAliases, 1,
		int(c.timeout.Seconds()), false, c.DisabledFilter, []string{"1.1"}, nil))
	if err != nil {
		return false, fmt.Errorf("disabled-filter on %s: %w", entry.DN, err)
	}
	return len(res.Entries) > 0, nil
}

// groups are the DNs of the user's groups: its memberOf values and the
// entries GroupFilter finds under GroupBase.
func (c *LDAP) groups(conn *ldap.Conn, entry *ldap.Entry) ([]string, error) {
	groups := entry.GetAttributeValues("memberOf")
	if c.GroupBase == "" {
		return groups, nil
	}
	filter := strings.ReplaceAll(c.GroupFilter, "{dn}", ldap.EscapeFilter(entry.DN))
	res, err := conn.Search(ldap.NewSearchRequest(c.GroupBase, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases, 0,
		int(c.timeout.Seconds()), false, filter, []string{"1.1"}, nil))
	if err != nil {
		return nil, fmt.Errorf("search groups %s under %s: %w", filter, c.GroupBase, err)
	}
	for _, g := range res.Entries {
		groups = append(groups, g.DN)
	}
	return groups, nil
}

// GroupMatches reports whether a mapping's group (a DN, or a cn) names
// the group of DN dn.
func GroupMatches(mapped, dn string) bool {
	want, err := ldap.ParseDN(mapped)
	got, gerr := ldap.ParseDN(dn)
	if gerr != nil {
		return false
	}
	if err == nil && len(want.RDNs) > 1 {
		return want.EqualFold(got)
	}
	if len(got.RDNs) == 0 || len(got.RDNs[0].Attributes) == 0 {
		return false
	}
	return strings.EqualFold(got.RDNs[0].Attributes[0].Value, strings.TrimPrefix(strings.TrimPrefix(mapped, "cn="), "CN="))
}
