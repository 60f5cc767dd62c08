package auth

import (
	"context"
	"errors"
	"fmt"
	"github.com/coffer-backup/coffer/internal/auth/passhash"
	"regexp"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// User is what is shown of an account (never its password hash).
type User struct {
	Name              string
	Enabled           bool
	HasPassword       bool // false until a setup link is used
	CreatedAt         time.Time
	PasswordChangedAt time.Time
	LastLoginAt       time.Time
	Realm             string // "local", or the realm that checks its password
}

func userView(u catalog.User) User {
	return User{Name: u.Name, Enabled: u.Enabled, HasPassword: u.PasswordHash != "", CreatedAt: u.CreatedAt,
		PasswordChangedAt: u.PasswordChangedAt, LastLoginAt: u.LastLoginAt, Realm: RealmName(u.Realm)}
}

// User names: lower case (sign-ins are lower-cased, so "Alice" signs in
// as alice), digits, and . _ - after the first character; up to 64.
var userNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

func checkUserName(name string) error {
	if !userNameRE.MatchString(name) {
		return errorf(ErrInvalid, "invalid user name %q: use 1 to 64 lower-case letters, digits, '.', '_' or '-', "+
			"starting with a letter or digit", name)
	}
	return nil
}

// requirePrivilege refuses actor without priv on path.
func requirePrivilege(actor *Subject, path string, priv Privilege) error {
	if !Allowed(actor, path, priv) {
		return errorf(ErrDenied, "%s lacks %s on %s", actor, priv, path)
	}
	return nil
}

// NewUser is a user to create.
type NewUser struct {
	Name string
	// Password lets the user sign in at once. Leave it empty to give the
	// user a one-time setup link instead (they choose their password;
	// nobody else ever knows it).
	Password   string
	RemoteAddr string // the actor's, for the audit log
}

// CreateUser adds an enabled user; it needs Perm.Modify on /access. Without
// a password it returns the token of a one-time setup link (valid for
// SetupLinkLifetime) for the user to choose one.
func (s *Service) CreateUser(ctx context.Context, actor *Subject, nu NewUser) (setupToken string, err error) {
	const op = "create-user"
	if err := checkUserName(nu.Name); err != nil {
		return "", err
	}
	object := userObject(nu.Name)
	if err := requirePrivilege(actor, AccessPath, PermModify); err != nil {
		return "", s.auditFailure(ctx, actor, op, object, nu.RemoteAddr, err)
	}
	now := s.now()
	u := catalog.User{Name: nu.Name, Enabled: true, CreatedAt: now}
	if nu.Password != "" {
		if err := checkNewPassword(nu.Password, nu.Name); err != nil {
			return "", err
		}
		u.PasswordHash, u.PasswordChangedAt = passhash.Hash(nu.Password, s.o.Hash), now
	}
	link := randomHex(secretBytes)
	err = s.store.UpdateAccess(ctx, func(tx catalog.AccessTx) error {
		if err := tx.InsertUser(ctx, u); err != nil {
			return err
		}
		if u.PasswordHash == "" {
			if err := s.insertSetupLink(ctx, tx, nu.Name, link, now); err != nil {
				return err
			}
		}
		rec := s.auditRecord(actor, op, object, nil)
		rec.RemoteAddr, rec.Detail = nu.RemoteAddr, "with a password"
		if u.PasswordHash == "" {
			rec.Detail = "with a one-time setup link"
		}
		return tx.AppendAudit(ctx, []catalog.AuditRecord{rec})
	})
	if err := s.changeError(ctx, actor, op, object, nu.RemoteAddr, "user "+nu.Name, err); err != nil {
		return "", err
	}
	if u.PasswordHash != "" {
		return "", nil
	}
	return setupTokenOf(link), nil
}

// ListUsers lists every user for whoever holds Sys.Audit on /access, and
// only the actor otherwise.
func (s *Service) ListUsers(ctx context.Context, actor *Subject) ([]User, error) {
	if actor == nil {
		return nil, errNoCredentials
	}
	us, err := s.store.ListUsers(ctx)
	if err != nil {
		return nil, err
	}
	all := Allowed(actor, AccessPath, SysAudit)
	var out []User
	for _, u := range us {
		if all || u.Name == actor.User {
			out = append(out, userView(u))
		}
	}
	return out, nil
}

// SetUserEnabled enables or disables a user (Perm.Modify on /access). A
// disabled user's sessions end at once and its API tokens stop working;
// enabling it again revives the tokens, not the sessions. Disabling the
// last user able to manage access is refused.
func (s *Service) SetUserEnabled(ctx context.Context, actor *Subject, name string, enabled bool, remote string) error {
	op := "enable-user"
	if !enabled {
		op = "disable-user"
	}
	object := userObject(name)
	if err := requirePrivilege(actor, AccessPath, PermModify); err != nil {
		return s.auditFailure(ctx, actor, op, object, remote, err)
	}
	err := s.store.UpdateAccess(ctx, func(tx catalog.AccessTx) error {
		return keepAnAdmin(ctx, tx, func() error {
			u, err := tx.GetUser(ctx, name)
			if err != nil {
				return err
			}
			u.Enabled = enabled
			if err := tx.UpdateUser(ctx, u); err != nil {
				return err
			}
			if !enabled {
				if _, err := tx.DeleteSessions(ctx, name, ""); err != nil {
					return err
				}
			}
			rec := s.auditRecord(actor, op, object, nil)
			rec.RemoteAddr = remote
			return tx.AppendAudit(ctx, []catalog.AuditRecord{rec})
		})
	})
	return s.changeError(ctx, actor, op, object, remote, "user "+name, err)
}

// DeleteUser removes a user with its tokens, sessions and ACL entries
// (Perm.Modify on /access); the audit log keeps its records. Deleting the
// last user able to manage access is refused.
func (s *Service) DeleteUser(ctx context.Context, actor *Subject, name, remote string) error {
	const op = "delete-user"
	object := userObject(name)
	if err := requirePrivilege(actor, AccessPath, PermModify); err != nil {
		return s.auditFailure(ctx, actor, op, object, remote, err)
	}
	err := s.store.UpdateAccess(ctx, func(tx catalog.AccessTx) error {
		return keepAnAdmin(ctx, tx, func() error {
			if err := tx.DeleteUser(ctx, name); err != nil {
				return err
			}
			rec := s.auditRecord(actor, op, object, nil)
			rec.RemoteAddr = remote
			return tx.AppendAudit(ctx, []catalog.AuditRecord{rec})
		})
	})
	return s.changeError(ctx, actor, op, object, remote, "user "+name, err)
}

// changeError turns the error of an access change into this package's
// classes, auditing refusals (a successful change audits itself).
func (s *Service) changeError(ctx context.Context, actor *Subject, op, object, remote, what string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, catalog.ErrNotFound):
		err = errorf(ErrNotFound, "%s does not exist", what)
	case errors.Is(err, catalog.ErrConflict):
		err = errorf(ErrConflict, "%s exists already", what)
	case Class(err) == "internal":
		return fmt.Errorf("%s: %s: %w", op, what, err)
	}
	return s.auditFailure(ctx, actor, op, object, remote, err)
}

// keepAnAdmin runs change and refuses it if it leaves no enabled user
// holding Perm.Modify on /access where there was one: nobody could then
// manage users or grant rights through the server.
func keepAnAdmin(ctx context.Context, tx catalog.AccessTx, change func() error) error {
	before, err := countAdmins(ctx, tx)
	if err != nil {
		return err
	}
	if err := change(); err != nil {
		return err
	}
	after, err := countAdmins(ctx, tx)
	if err != nil {
		return err
	}
	if before > 0 && after == 0 {
		return errorf(ErrConflict, "this would leave no enabled user able to manage access (Perm.Modify on %s): "+
			"grant that to another user first", AccessPath)
	}
	return nil
}

func countAdmins(ctx context.Context, tx catalog.AccessTx) (int, error) {
	users, err := tx.ListUsers(ctx)
	if err != nil {
		return 0, err
	}
	acl, err := tx.ListACL(ctx, catalog.ACLFilter{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, u := range users {
		if u.Enabled && Allowed(NewSubject(u.Name, "", acl), AccessPath, PermModify) {
			n++
		}
	}
	return n, nil
}
