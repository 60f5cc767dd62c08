package auth

import (
	"context"
	"errors"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// ACLChange adds or removes an ACL entry.
type ACLChange struct {
	Path string
	User string
	// TokenID makes it an entry of the user's API token.
	TokenID    string
	Role       Role
	Propagate  bool // ignored when removing
	RemoteAddr string
}

// mayChangeACL: Perm.Modify on the entry's path (PBS: rights on a subtree
// can be delegated), or, for an entry of an API token, being the token's
// user in person (the token can only narrow the user's own rights).
func mayChangeACL(actor *Subject, c ACLChange, path string) error {
	if c.TokenID != "" && actor != nil && !actor.local && !actor.IsToken() && actor.User == c.User {
		return nil
	}
	return requirePrivilege(actor, path, PermModify)
}

// SetACL adds an entry (or changes whether it propagates). A token's
// entry may not grant more than its user holds on the path, and a change
// that leaves nobody able to manage access is refused.
func (s *Service) SetACL(ctx context.Context, actor *Subject, c ACLChange) error {
	return s.changeACL(ctx, actor, c, "set-acl", func(ctx context.Context, tx catalog.AccessTx, e catalog.ACLEntry) error {
		if e.TokenID != "" {
			acl, err := tx.ListACL(ctx, catalog.ACLFilter{User: e.User})
			if err != nil {
				return err
			}
			if _, err := checkGrants([]Grant{{Path: e.Path, Role: Role(e.Role)}}, NewSubject(e.User, "", acl)); err != nil {
				return err
			}
		}
		return tx.PutACL(ctx, e)
	})
}

// RemoveACL deletes an entry; removing the last rights to manage access
// is refused.
func (s *Service) RemoveACL(ctx context.Context, actor *Subject, c ACLChange) error {
	return s.changeACL(ctx, actor, c, "remove-acl", func(ctx context.Context, tx catalog.AccessTx, e catalog.ACLEntry) error {
		return tx.DeleteACL(ctx, e)
	})
}

func (s *Service) changeACL(ctx context.Context, actor *Subject, c ACLChange, op string,
	change func(context.Context, catalog.AccessTx, catalog.ACLEntry) error) error {
	path, err := ParsePath(c.Path)
	if err != nil {
		return err
	}
	if _, err := ParseRole(string(c.Role)); err != nil {
		return err
	}
	if err := mayChangeACL(actor, c, path); err != nil {
		return s.auditFailure(ctx, actor, op, path, c.RemoteAddr, err)
	}
	e := catalog.ACLEntry{Path: path, User: c.User, TokenID: c.TokenID, Role: string(c.Role), Propagate: c.Propagate}
	err = s.store.UpdateAccess(ctx, func(tx catalog.AccessTx) error {
		return keepAnAdmin(ctx, tx, func() error {
			if err := change(ctx, tx, e); err != nil {
				return err
			}
			rec := s.auditRecord(actor, op, path, nil)
			rec.RemoteAddr = c.RemoteAddr
			rec.Detail = "user " + e.User
			if e.TokenID != "" {
				rec.Detail = "API token " + e.TokenID + " of user " + e.User
			}
			rec.Detail += ": " + roleDetail(e.Role, e.Path, e.Propagate && op == "set-acl")
			return tx.AppendAudit(ctx, []catalog.AuditRecord{rec})
		})
	})
	if errors.Is(err, catalog.ErrNotFound) {
		what := "user " + c.User
		if c.TokenID != "" {
			what += "'s API token " + c.TokenID
		}
		return s.auditFailure(ctx, actor, op, path, c.RemoteAddr,
			errorf(ErrNotFound, "%s, or its entry %s on %s, does not exist", what, c.Role, path))
	}
	return s.changeError(ctx, actor, op, path, c.RemoteAddr, "ACL entry", err)
}

// ListACL lists every entry for whoever holds Sys.Audit on /access, and
// the actor's own (its user's and its tokens') otherwise.
func (s *Service) ListACL(ctx context.Context, actor *Subject) ([]catalog.ACLEntry, error) {
	f := catalog.ACLFilter{}
	if !Allowed(actor, AccessPath, SysAudit) {
		if actor == nil {
			return nil, errNoCredentials
		}
		f.User = actor.User
	}
	return s.store.ListACL(ctx, f)
}
