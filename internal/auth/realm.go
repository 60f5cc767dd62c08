package auth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/coffer-backup/coffer/internal/auth/idp"
	"sort"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// Realms are the configured sign-in realms of a server (Options.Realms).
type Realms struct {
	list    []*realm
	byName  map[string]*realm
	def     *realm
	flowKey []byte // authenticates OIDC flow cookies
}

type realm struct {
	cfg  RealmConfig
	oidc *oidcRealm // for an OIDC realm
}

// NewRealms checks the realms: section and prepares its realms. Nothing
// is asked of a directory or a provider yet: a server starts while they
// are down, and its local users can sign in.
func NewRealms(cs []RealmConfig) (*Realms, error) {
	if err := CheckRealms(cs); err != nil {
		return nil, err
	}
	rs := &Realms{byName: map[string]*realm{}, flowKey: newFlowKey()}
	for _, c := range cs {
		r := &realm{cfg: c}
		if c.Type == RealmOIDC {
			r.oidc = newOIDCRealm(&r.cfg)
		}
		rs.list = append(rs.list, r)
		rs.byName[c.Name] = r
		if c.Default {
			rs.def = r
		}
	}
	return rs, nil
}

// RealmInfo is what the sign-in page shows of a realm.
type RealmInfo struct {
	Name    string
	Type    string
	Comment string
	Default bool
}

// Realms lists the configured realms in the file's order.
func (s *Service) Realms() []RealmInfo {
	if s.o.Realms == nil {
		return nil
	}
	out := make([]RealmInfo, 0, len(s.o.Realms.list))
	for _, r := range s.o.Realms.list {
		out = append(out, RealmInfo{Name: r.cfg.Name, Type: r.cfg.Type, Comment: r.cfg.Comment, Default: r.cfg.Default})
	}
	return out
}

func (s *Service) realm(name string) *realm {
	if s.o.Realms == nil {
		return nil
	}
	return s.o.Realms.byName[name]
}

// RealmName is how a user's catalog realm is shown: "local" for coffer's
// own users.
func RealmName(catalogRealm string) string { return cmp.Or(catalogRealm, LocalRealm) }

// realmDetail is the audit detail of a sign-in through a realm.
func realmDetail(name string) string { return "realm " + RealmName(name) }

type signInRealmKey struct{}

// The realm of a sign-in travels in its context to the shared throttle
// and failure records (countAttempt, loginAudit), so that they name it
// without each caller passing it through.
func withSignInRealm(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, signInRealmKey{}, name)
}

func signInRealm(ctx context.Context) string {
	name, _ := ctx.Value(signInRealmKey{}).(string)
	return name
}

// errNoRealm refuses a sign-in naming a realm that is not configured.
func (s *Service) errNoRealm(name string) error {
	names := []string{LocalRealm}
	for _, r := range s.Realms() {
		names = append(names, r.Name)
	}
	return errorf(ErrInvalid, "there is no sign-in realm %q: the realms are %s", name, strings.Join(names, ", "))
}

// passwordRealm chooses the realm that checks a typed name and password:
// the one named by the request (its Realm, or "name@realm"), else the
// realm of the existing user of that name, else the default realm for a
// name that is no user yet. It returns nil for coffer's own users, and the
// name without its realm.
func (s *Service) passwordRealm(ctx context.Context, req LoginRequest) (*realm, string, error) {
	name, realmName := normalizeUserName(req.User), req.Realm
	if at := strings.LastIndexByte(name, '@'); at > 0 && realmName == "" {
		name, realmName = name[:at], name[at+1:]
	}
	switch {
	case realmName == LocalRealm:
		return nil, name, nil
	case realmName != "":
		r := s.realm(realmName)
		if r == nil {
			return nil, name, s.errNoRealm(realmName)
		}
		return r, name, nil
	}
	u, err := s.store.GetUser(ctx, name)
	switch {
	case err == nil && u.Realm != "":
		if r := s.realm(u.Realm); r != nil {
			return r, name, nil
		}
		// A realm no longer configured signs nobody in; its users
		// are refused like a wrong password.
		return &realm{cfg: RealmConfig{Name: u.Realm}}, name, nil
	case err == nil:
		return nil, name, nil
	case !errors.Is(err, catalog.ErrNotFound):
		return nil, name, fmt.Errorf("sign-in: %w", err)
	case s.o.Realms != nil && s.o.Realms.def != nil:
		return s.o.Realms.def, name, nil
	}
	return nil, name, nil
}

// loginRealm signs a user in with a password checked by a directory. It
// is throttled like a local sign-in (the same keys: the name and the
// address), and every outcome is audited with the realm.
func (s *Service) loginRealm(ctx context.Context, r *realm, name string, req LoginRequest) (*NewSession, error) {
	ctx = withSignInRealm(ctx, r.cfg.Name)
	now := s.now()
	before, after, err := s.countAttempt(ctx, "login", name, req.RemoteAddr, now)
	if err != nil {
		return nil, err
	}
	id, err := s.checkRealmPassword(ctx, r, name, req.Password)
	if err != nil {
		return nil, s.failRealmLogin(ctx, name, req.RemoteAddr, now, err)
	}
	return s.openRealmSession(ctx, r, id, req.RemoteAddr, func(tx catalog.AccessTx) error {
		return settleAttempt(ctx, tx, before, after)
	})
}

func (s *Service) checkRealmPassword(ctx context.Context, r *realm, name, password string) (idp.Identity, error) {
	if checkUserName(name) != nil {
		return idp.Identity{}, errBadCredentials
	}
	switch r.cfg.Type {
	case RealmLDAP, RealmActiveDirectory:
		return r.cfg.LDAP.Authenticate(ctx, r.cfg.Name, name, password)
	case RealmOIDC:
		return idp.Identity{}, errorf(ErrInvalid, "realm %s signs in through its identity provider: "+
			"use its button on the sign-in page", r.cfg.Name)
	}
	return idp.Identity{}, errBadCredentials // a realm no longer configured
}

// failRealmLogin audits a failed realm sign-in and returns what the
// client is told: the refusal (a directory's is errBadCredentials,
// whatever the cause), or a directory's or a provider's failure as an
// internal error (the server logs it).
func (s *Service) failRealmLogin(ctx context.Context, name, remote string, now time.Time, err error) error {
	rec := s.loginAudit(ctx, s.store, "login", name, remote, now, err)
	aerr := s.store.AppendAudit(ctx, []catalog.AuditRecord{rec})
	switch {
	case Class(err) == "internal" || aerr != nil:
		return errors.Join(err, aerr)
	}
	return err
}

// grants are the ACL entries the realm's mappings give an identity.
func (r *realm) grants(id idp.Identity) []catalog.ACLEntry {
	seen := map[catalog.ACLEntry]bool{}
	var out []catalog.ACLEntry
	for _, m := range r.cfg.Roles {
		for _, g := range id.Groups {
			matched := m.Value == g
			if r.cfg.Type != RealmOIDC {
				matched = idp.GroupMatches(m.Group, g)
			}
			e := catalog.ACLEntry{Path: m.Path, User: id.Name, Role: m.Role, Propagate: m.propagates()}
			if matched && !seen[e] {
				seen[e] = true
				out = append(out, e)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path+out[i].Role < out[j].Path+out[j].Role })
	return out
}
