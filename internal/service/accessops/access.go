package accessops

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/service"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/auth/factorkey"
	"github.com/coffer-backup/coffer/internal/catalog"
)

// Access control as operations: signing in and out, first-run setup,
// accounts, API tokens, ACL entries and the audit log. internal/auth
// checks who may do what (with the acting subject passed in) and audits
// every change in the transaction that makes it; these methods hand it
// the subject and turn its values into documents.

// withAccess runs fn with the access control: the server's, or one over
// the catalog opened for this operation.
func (s Ops) withAccess(ctx context.Context, fn func(*auth.Service) error) error {
	return s.withAuth(ctx, false, fn)
}

// withAuth runs fn with the server's access control or, on the server's
// host, one over the catalog opened for this operation; with
// secondFactorKey, that one also holds the key that seals second-factor
// seeds, from the state directory. Only the second-factor operations ask
// for it, so that other local commands never create the key file.
func (s Ops) withAuth(ctx context.Context, secondFactorKey bool, fn func(*auth.Service) error) error {
	if s.Config.Access != nil {
		return fn(s.Config.Access)
	}
	c, err := s.OpenCatalog(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	o := s.Config.AccessOptions
	if secondFactorKey && s.Config.StateDir != "" {
		path := factorkey.File(s.Config.StateDir)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		if o.SecondFactorKey, err = factorkey.Load(path); err != nil {
			return err
		}
	}
	a, err := auth.New(c, o)
	if err != nil {
		return err
	}
	return fn(a)
}

func access[T any](ctx context.Context, s Ops, fn func(*auth.Service) (T, error)) (T, error) {
	return authed(ctx, s, false, fn)
}

func authed[T any](ctx context.Context, s Ops, secondFactorKey bool, fn func(*auth.Service) (T, error)) (T, error) {
	var out T
	err := s.withAuth(ctx, secondFactorKey, func(a *auth.Service) error {
		var err error
		out, err = fn(a)
		return err
	})
	return out, err
}

// Bootstrap prepares the first run (coffer server init, or the first
// start of a server without users): it creates the administrator, with
// the Admin role on /, and returns a one-time setup link for choosing its
// password. There is no default password.
func (s Ops) Bootstrap(ctx context.Context, admin string) (*api.SetupLink, error) {
	token, err := access(ctx, s, func(a *auth.Service) (string, error) { return a.Bootstrap(ctx, admin) })
	if err != nil {
		return nil, err
	}
	return s.setupLink(admin, token), nil
}

// NeedsSetup reports a catalog without any user: the first start.
func (s Ops) NeedsSetup(ctx context.Context) (bool, error) {
	users, err := access(ctx, s, func(a *auth.Service) ([]auth.User, error) { return a.ListUsers(ctx, auth.Local()) })
	return len(users) == 0, err
}

func (s Ops) setupLink(user, token string) *api.SetupLink {
	l := &api.SetupLink{User: user, Token: token}
	if s.Config.PublicURL != "" {
		// In the fragment: no proxy or access log records it.
		l.Link = strings.TrimRight(s.Config.PublicURL, "/") + "/ui/setup#" + token
	}
	return l
}

// Login signs a user in and opens a browser session; the answer's cookie
// carries it (auth.SessionCookie).
func (s Ops) Login(ctx context.Context, call *api.LoginInput) (*auth.NewSession, error) {
	in := call.Body
	return access(ctx, s, func(a *auth.Service) (*auth.NewSession, error) {
		return a.Login(ctx, auth.LoginRequest{User: in.User, Password: in.Password, Realm: in.Realm, RemoteAddr: service.RemoteAddr(ctx)})
	})
}

// Logout ends the session of a cookie value.
func (s Ops) Logout(ctx context.Context, in *api.LogoutInput) error {
	return s.withAccess(ctx, func(a *auth.Service) error { return a.Logout(ctx, in.Session, service.RemoteAddr(ctx)) })
}

// CompleteSetup uses a one-time setup link to set its user's password.
func (s Ops) CompleteSetup(ctx context.Context, call *api.CompleteSetupInput) (*api.SetupDone, error) {
	in := call.Body
	user, err := access(ctx, s, func(a *auth.Service) (string, error) {
		return a.CompleteSetup(ctx, in.Token, in.Password, service.RemoteAddr(ctx))
	})
	if err != nil {
		return nil, err
	}
	return &api.SetupDone{User: user}, nil
}

// WhoAmI names the caller: the user signed in (or the API token's
// owner) and the token, for a console's header and a script's check.
func (s Ops) WhoAmI(ctx context.Context, _ *api.WhoAmIInput) (*api.Caller, error) {
	a := s.Actor(ctx)
	if a == nil {
		return nil, api.Errorf(api.Unauthenticated, "nobody is signed in: sign in, or send an API token")
	}
	return &api.Caller{User: a.User, TokenID: a.TokenID, Pending: a.Pending}, nil
}

// Users lists the accounts (only one's own without Sys.Audit on /access).
func (s Ops) Users(ctx context.Context, _ *api.ListUsersInput) ([]api.User, error) {
	us, err := access(ctx, s, func(a *auth.Service) ([]auth.User, error) { return a.ListUsers(ctx, s.Actor(ctx)) })
	if err != nil {
		return nil, err
	}
	out := []api.User{}
	for _, u := range us {
		out = append(out, api.User{Name: u.Name, Enabled: u.Enabled, HasPassword: u.HasPassword, CreatedAt: u.CreatedAt,
			PasswordChangedAt: u.PasswordChangedAt, LastLoginAt: u.LastLoginAt, Realm: u.Realm})
	}
	return out, nil
}

// CreateUser adds an account; without a password it comes with a
// one-time setup link for its owner.
func (s Ops) CreateUser(ctx context.Context, call *api.CreateUserInput) (*api.SetupLink, error) {
	in := call.Body
	token, err := access(ctx, s, func(a *auth.Service) (string, error) {
		return a.CreateUser(ctx, s.Actor(ctx), auth.NewUser{Name: in.Name, Password: in.Password, RemoteAddr: service.RemoteAddr(ctx)})
	})
	if err != nil {
		return nil, err
	}
	if token == "" {
		return &api.SetupLink{User: in.Name}, nil
	}
	return s.setupLink(in.Name, token), nil
}

// EnableUser lets a disabled user sign in again (its tokens work again).
func (s Ops) EnableUser(ctx context.Context, in *api.UserParam) error {
	return s.withAccess(ctx, func(a *auth.Service) error {
		return a.SetUserEnabled(ctx, s.Actor(ctx), in.User, true, service.RemoteAddr(ctx))
	})
}

// DisableUser ends a user's sessions and stops its tokens.
func (s Ops) DisableUser(ctx context.Context, in *api.UserParam) error {
	return s.withAccess(ctx, func(a *auth.Service) error {
		return a.SetUserEnabled(ctx, s.Actor(ctx), in.User, false, service.RemoteAddr(ctx))
	})
}

// DeleteUser removes a user with its tokens, sessions and ACL entries.
func (s Ops) DeleteUser(ctx context.Context, in *api.UserParam) error {
	return s.withAccess(ctx, func(a *auth.Service) error { return a.DeleteUser(ctx, s.Actor(ctx), in.User, service.RemoteAddr(ctx)) })
}

// IssueSetupLink gives a user a new one-time link to choose a password.
func (s Ops) IssueSetupLink(ctx context.Context, in *api.UserParam) (*api.SetupLink, error) {
	name := in.User
	token, err := access(ctx, s, func(a *auth.Service) (string, error) {
		return a.IssueSetupLink(ctx, s.Actor(ctx), name, service.RemoteAddr(ctx))
	})
	if err != nil {
		return nil, err
	}
	return s.setupLink(name, token), nil
}

// ChangePassword sets a user's password (one's own with the old one).
func (s Ops) ChangePassword(ctx context.Context, call *api.ChangePasswordInput) error {
	user, in := call.User, call.Body
	return s.withAccess(ctx, func(a *auth.Service) error {
		return a.ChangePassword(ctx, s.Actor(ctx), auth.PasswordChange{User: user, Old: in.Old, New: in.New, RemoteAddr: service.RemoteAddr(ctx)})
	})
}

// Tokens lists a user's API tokens ("": the actor's own).
func (s Ops) Tokens(ctx context.Context, in *api.ListTokensInput) ([]api.Token, error) {
	user := in.User
	actor := s.Actor(ctx)
	if user == "" && actor != nil {
		user = actor.User
	}
	ts, err := access(ctx, s, func(a *auth.Service) ([]auth.TokenInfo, error) { return a.ListTokens(ctx, actor, user) })
	if err != nil {
		return nil, err
	}
	out := []api.Token{}
	for _, t := range ts {
		out = append(out, tokenDoc(t))
	}
	return out, nil
}

func tokenDoc(t auth.TokenInfo) api.Token {
	d := api.Token{ID: t.ID, User: t.User, Comment: t.Comment, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt,
		LastUsedAt: t.LastUsedAt, Grants: []api.Grant{}}
	for _, g := range t.Grants {
		d.Grants = append(d.Grants, api.Grant{Path: g.Path, Role: string(g.Role), Propagate: g.Propagate})
	}
	return d
}

// CreateToken creates an API token: the answer is the only time its
// secret is shown.
func (s Ops) CreateToken(ctx context.Context, call *api.CreateTokenInput) (*api.NewToken, error) {
	in := call.Body
	req := auth.TokenRequest{User: in.User, Comment: in.Comment, RemoteAddr: service.RemoteAddr(ctx),
		Lifetime: time.Duration(in.LifetimeSeconds * float64(time.Second))}
	for _, g := range in.Grants {
		req.Grants = append(req.Grants, auth.Grant{Path: g.Path, Role: auth.Role(g.Role), Propagate: g.Propagate})
	}
	nt, err := access(ctx, s, func(a *auth.Service) (auth.NewToken, error) { return a.CreateToken(ctx, s.Actor(ctx), req) })
	if err != nil {
		return nil, err
	}
	return &api.NewToken{Token: nt.Token, Info: tokenDoc(nt.Info)}, nil
}

// RevokeToken deletes an API token at once.
func (s Ops) RevokeToken(ctx context.Context, in *api.RevokeTokenInput) error {
	return s.withAccess(ctx, func(a *auth.Service) error {
		return a.RevokeToken(ctx, s.Actor(ctx), in.Token, service.RemoteAddr(ctx))
	})
}

// ACL lists the ACL entries (only one's own without Sys.Audit on /access).
func (s Ops) ACL(ctx context.Context, _ *api.ListACLInput) ([]api.ACLEntry, error) {
	es, err := access(ctx, s, func(a *auth.Service) ([]catalog.ACLEntry, error) { return a.ListACL(ctx, s.Actor(ctx)) })
	if err != nil {
		return nil, err
	}
	out := []api.ACLEntry{}
	for _, e := range es {
		out = append(out, api.ACLEntry{Path: e.Path, User: e.User, TokenID: e.TokenID, Role: e.Role, Propagate: e.Propagate})
	}
	return out, nil
}

// SetACL adds an ACL entry (or changes whether it propagates).
func (s Ops) SetACL(ctx context.Context, in *api.SetACLInput) error {
	return s.withAccess(ctx, func(a *auth.Service) error { return a.SetACL(ctx, s.Actor(ctx), aclChange(ctx, in.Body)) })
}

// RemoveACL deletes an ACL entry.
func (s Ops) RemoveACL(ctx context.Context, in *api.RemoveACLInput) error {
	return s.withAccess(ctx, func(a *auth.Service) error { return a.RemoveACL(ctx, s.Actor(ctx), aclChange(ctx, in.Body)) })
}

func aclChange(ctx context.Context, e api.ACLEntry) auth.ACLChange {
	return auth.ACLChange{Path: e.Path, User: e.User, TokenID: e.TokenID, Role: auth.Role(e.Role), Propagate: e.Propagate,
		RemoteAddr: service.RemoteAddr(ctx)}
}

// Audit lists audit records, newest first (only one's own without
// Sys.Audit on /system).
func (s Ops) Audit(ctx context.Context, in *api.QueryAuditInput) ([]api.AuditRecord, error) {
	f := catalog.AuditFilter{User: in.User, TokenID: in.TokenID, Operation: in.Operation, Object: in.Object, Result: in.Result,
		Since: in.Since, Until: in.Until, BeforeID: in.BeforeID, Limit: in.Limit}
	rs, err := access(ctx, s, func(a *auth.Service) ([]catalog.AuditRecord, error) { return a.QueryAudit(ctx, s.Actor(ctx), f) })
	if err != nil {
		return nil, err
	}
	out := []api.AuditRecord{}
	for _, r := range rs {
		out = append(out, api.AuditRecord{ID: r.ID, Time: r.Time, User: r.User, TokenID: r.TokenID, Operation: r.Operation,
			Object: r.Object, Result: r.Result, ErrorClass: r.ErrorClass, RemoteAddr: r.RemoteAddr, Detail: r.Detail})
	}
	return out, nil
}
