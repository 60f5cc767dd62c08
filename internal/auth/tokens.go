package auth

import (
	"context"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// Grant is a role on an ACL path, for a user or an API token.
type Grant struct {
	Path      string
	Role      Role
	Propagate bool
}

// TokenRequest asks for an API token.
type TokenRequest struct {
	// User owns the token; "" is the actor. Creating a token for someone
	// else needs Perm.Modify on /access.
	User    string
	Comment string
	// Lifetime is required: 0 < Lifetime <= MaxTokenLifetime.
	Lifetime time.Duration
	// Grants are the token's rights. A token holds what both they and its
	// user's rights allow, and a grant beyond the user's rights is
	// refused; a token without grants can do nothing (PBS's rule).
	Grants     []Grant
	RemoteAddr string
}

// TokenInfo is what is shown of an API token (never its secret).
type TokenInfo struct {
	ID         string
	User       string
	Comment    string
	CreatedAt  time.Time
	ExpiresAt  time.Time
	LastUsedAt time.Time
	Grants     []Grant
}

// NewToken is a created API token.
type NewToken struct {
	// Token is the credential, shown this once and kept nowhere.
	Token string
	Info  TokenInfo
}

const maxCommentLen = 200

func checkComment(c string) error {
	if len(c) > maxCommentLen || !utf8.ValidString(c) {
		return errorf(ErrInvalid, "the comment must be valid UTF-8 of at most %d bytes", maxCommentLen)
	}
	for _, r := range c {
		if unicode.IsControl(r) {
			return errorf(ErrInvalid, "the comment must be one line without control characters")
		}
	}
	return nil
}

// checkGrants parses the grants' paths and roles and refuses one that
// would give a token more than its user holds there.
func checkGrants(grants []Grant, owner *Subject) ([]catalog.ACLEntry, error) {
	out := make([]catalog.ACLEntry, len(grants))
	for i, g := range grants {
		path, err := ParsePath(g.Path)
		if err != nil {
			return nil, err
		}
		if _, err := ParseRole(string(g.Role)); err != nil {
			return nil, err
		}
		// Roles are coarse (Auditor holds Sys.Audit, meaningless on a
		// repository): only what the grant means on its path must be
		// the user's. A token never holds more anyway: its rights are
		// cut to its user's whenever they are checked.
		comps, _ := splitPath(path)
		if missing := g.Role.Privileges() & meaningfulAt(comps) &^ owner.Privileges(path); missing != 0 {
			return nil, errorf(ErrDenied, "a token holds at most its user's rights: %s on %s grants %s, "+
				"which %s does not hold there", g.Role, path, missing, owner.User)
		}
		out[i] = catalog.ACLEntry{Path: path, User: owner.User, Role: string(g.Role), Propagate: g.Propagate}
	}
	return out, nil
}

// CreateToken creates an API token and returns it, the only time its
// secret is shown. A token cannot create tokens.
func (s *Service) CreateToken(ctx context.Context, actor *Subject, req TokenRequest) (NewToken, error) {
	const op = "create-token"
	owner := req.User
	if owner == "" && actor != nil {
		owner = actor.User
	}
	switch {
	case actor.IsToken():
		return NewToken{}, s.auditFailure(ctx, actor, op, AccessPath, req.RemoteAddr,
			errorf(ErrDenied, "an API token cannot create API tokens: sign in as %s", actor.User))
	case actor == nil || actor.local || owner != actor.User:
		if err := requirePrivilege(actor, AccessPath, PermModify); err != nil {
			return NewToken{}, s.auditFailure(ctx, actor, op, AccessPath, req.RemoteAddr, err)
		}
	}
	if req.Lifetime <= 0 || req.Lifetime > s.o.MaxTokenLifetime {
		return NewToken{}, errorf(ErrInvalid, "give the token a lifetime between 1 second and %s (an expiry is required)",
			s.o.MaxTokenLifetime)
	}
	if err := checkComment(req.Comment); err != nil {
		return NewToken{}, err
	}
	now := s.now()
	id, secret := randomHex(tokenIDBytes), randomHex(secretBytes)
	secretRaw, _ := parseHex(secret, secretBytes)
	tok := catalog.APIToken{ID: id, User: owner, SecretSHA256: secretHash(secretRaw), Comment: req.Comment,
		CreatedAt: now, ExpiresAt: now.Add(req.Lifetime)}
	var entries []catalog.ACLEntry
	err := s.store.UpdateAccess(ctx, func(tx catalog.AccessTx) error {
		if _, err := tx.GetUser(ctx, owner); err != nil {
			return err
		}
		acl, err := tx.ListACL(ctx, catalog.ACLFilter{User: owner})
		if err != nil {
			return err
		}
		if entries, err = checkGrants(req.Grants, NewSubject(owner, "", acl)); err != nil {
			return err
		}
		if err := tx.InsertAPIToken(ctx, tok); err != nil {
			return err
		}
		for _, e := range entries {
			e.TokenID = id
			if err := tx.PutACL(ctx, e); err != nil {
				return err
			}
		}
		rec := s.auditRecord(actor, op, tokenObject(owner, id), nil)
		rec.RemoteAddr = req.RemoteAddr
		rec.Detail = fmt.Sprintf("expires %s; %s", tok.ExpiresAt.Format(time.RFC3339), grantsDetail(entries))
		return tx.AppendAudit(ctx, []catalog.AuditRecord{rec})
	})
	if err := s.changeError(ctx, actor, op, userObject(owner), req.RemoteAddr, "user "+owner, err); err != nil {
		return NewToken{}, err
	}
	info := tokenInfo(tok, nil)
	for _, e := range entries {
		info.Grants = append(info.Grants, Grant{Path: e.Path, Role: Role(e.Role), Propagate: e.Propagate})
	}
	return NewToken{Token: FormatAPIToken(id, secretRaw), Info: info}, nil
}

func tokenInfo(t catalog.APIToken, acl []catalog.ACLEntry) TokenInfo {
	info := TokenInfo{ID: t.ID, User: t.User, Comment: t.Comment, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt,
		LastUsedAt: t.LastUsedAt}
	for _, e := range acl {
		if e.TokenID == t.ID {
			info.Grants = append(info.Grants, Grant{Path: e.Path, Role: Role(e.Role), Propagate: e.Propagate})
		}
	}
	return info
}

// ListTokens lists a user's tokens ("" for every user's with Sys.Audit on
// /access). Users see their own; others' need Sys.Audit on /access.
func (s *Service) ListTokens(ctx context.Context, actor *Subject, user string) ([]TokenInfo, error) {
	own := actor != nil && !actor.local && user == actor.User
	if !own && !Allowed(actor, AccessPath, SysAudit) {
		return nil, errorf(ErrDenied, "%s lacks %s on %s to see other users' tokens", actor, SysAudit, AccessPath)
	}
	toks, err := s.store.ListAPITokens(ctx, user)
	if err != nil {
		return nil, err
	}
	acl, err := s.store.ListACL(ctx, catalog.ACLFilter{User: user})
	if err != nil {
		return nil, err
	}
	out := make([]TokenInfo, 0, len(toks))
	for _, t := range toks {
		out = append(out, tokenInfo(t, acl))
	}
	return out, nil
}

// RevokeToken deletes a token at once. Its owner may revoke it, and so
// may the token itself (a leaked token is revoked with itself) or anyone
// with Perm.Modify on /access.
func (s *Service) RevokeToken(ctx context.Context, actor *Subject, id, remote string) error {
	const op = "revoke-token"
	err := s.store.UpdateAccess(ctx, func(tx catalog.AccessTx) error {
		t, err := tx.GetAPIToken(ctx, id)
		if err != nil {
			return err
		}
		mine := actor != nil && !actor.local && t.User == actor.User && (!actor.IsToken() || actor.TokenID == id)
		if !mine {
			if err := requirePrivilege(actor, AccessPath, PermModify); err != nil {
				return err
			}
		}
		if err := tx.DeleteAPIToken(ctx, id); err != nil {
			return err
		}
		rec := s.auditRecord(actor, op, tokenObject(t.User, id), nil)
		rec.RemoteAddr = remote
		return tx.AppendAudit(ctx, []catalog.AuditRecord{rec})
	})
	return s.changeError(ctx, actor, op, AccessPath, remote, fmt.Sprintf("API token %s", id), err)
}
