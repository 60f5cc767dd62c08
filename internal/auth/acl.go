package auth

import (
	"strings"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// Subject is who asks: a user, or one of a user's API tokens, with the ACL
// entries that concern it, read when it was authenticated. It is
// immutable; a changed ACL applies from the next request.
type Subject struct {
	// User is the user's name (for an API token, its owner's).
	User string
	// TokenID is set when the request came with an API token.
	TokenID string
	// SessionID is the hex SHA-256 of the browser session, when it came
	// with one (what ChangePassword keeps and Logout ends).
	SessionID string
	// Pending is what a session still lacks before it is a full one
	// (catalog.PendingSecondFactor, catalog.PendingEnrolment): such a
	// subject holds no privilege, and the server lets it call only the
	// operations of the second step.
	Pending string

	local bool
	user  []catalog.ACLEntry // the user's own entries
	token []catalog.ACLEntry // the token's entries
}

// LocalUser is the name the local console subject is audited under; no
// user can be called that ('@' is not allowed in user names).
const LocalUser = "@local"

// Local is the administrator at the server's console: the command line
// run with direct access to the catalog (coffer server init, coffer user
// ...). Whoever can open the catalog can change it anyway, so it holds
// every privilege everywhere. Never hand it to a network request.
func Local() *Subject { return &Subject{User: LocalUser, local: true} }

// NewSubject builds a subject from ACL entries: those with tokenID are
// the token's, those without a token the user's; others are ignored. The
// authenticating functions call it with the entries from the catalog;
// tests of other packages can call it with their own.
func NewSubject(user, tokenID string, entries []catalog.ACLEntry) *Subject {
	s := &Subject{User: user, TokenID: tokenID}
	for _, e := range entries {
		switch {
		case e.User != user:
		case e.TokenID == "":
			s.user = append(s.user, e)
		case e.TokenID == tokenID:
			s.token = append(s.token, e)
		}
	}
	return s
}

// IsToken reports a subject authenticated by an API token.
func (s *Subject) IsToken() bool { return s != nil && s.TokenID != "" }

// String names the subject for messages: "alice" or "alice (API token ID)".
func (s *Subject) String() string {
	if s == nil {
		return "nobody"
	}
	if s.TokenID != "" {
		return s.User + " (API token " + s.TokenID + ")"
	}
	return s.User
}

// Privileges returns what the subject may do on path: the user's
// privileges there, and for an API token only those its own entries grant
// as well (a token never holds more than its user). A nil subject or a
// malformed path has none.
func (s *Subject) Privileges(path string) Privilege {
	if s == nil || s.Pending != "" {
		return 0
	}
	if s.local {
		return AllPrivileges
	}
	comps, err := splitPath(path)
	if err != nil {
		return 0
	}
	p := privilegesAt(s.user, comps)
	if s.TokenID != "" {
		p &= privilegesAt(s.token, comps)
	}
	return p
}

// Allowed reports whether s holds every privilege of priv on path. No
// privilege at all (0) is never allowed: an operation that declares none
// is a mistake, not an open door.
func Allowed(s *Subject, path string, priv Privilege) bool {
	return priv != 0 && s.Privileges(path).Has(priv)
}

// Allowed is the method form of Allowed.
func (s *Subject) Allowed(path string, priv Privilege) bool { return Allowed(s, path, priv) }

// AllowedAny reports whether s holds priv on at least one of paths (a
// backup point is reached through its repository or its VM).
func AllowedAny(s *Subject, priv Privilege, paths ...string) bool {
	for _, p := range paths {
		if Allowed(s, p, priv) {
			return true
		}
	}
	return false
}

// AllowedBelow reports whether s holds priv on path or on some path below
// it: whether a list of path's children has anything to show s (a tenant
// with rights on one VM sees its connection in the list of connections).
func AllowedBelow(s *Subject, path string, priv Privilege) bool {
	if Allowed(s, path, priv) {
		return true
	}
	if s == nil || s.local {
		return false
	}
	// Rights below path can only come from an entry below it; for a
	// token both its entries and its user's must grant them, so the
	// token's own entries are the candidates.
	candidates := s.user
	if s.TokenID != "" {
		candidates = s.token
	}
	prefix := path + "/"
	if path == RootPath {
		prefix = RootPath
	}
	for _, e := range candidates {
		if strings.HasPrefix(e.Path, prefix) && Allowed(s, e.Path, priv) {
			return true
		}
	}
	return false
}

// Filter returns the items on which s holds priv through at least one of
// the paths paths(item) returns, in their order: what a list endpoint
// shows.
func Filter[T any](s *Subject, priv Privilege, items []T, paths func(T) []string) []T {
	var out []T
	for _, it := range items {
		if AllowedAny(s, priv, paths(it)...) {
			out = append(out, it)
		}
	}
	return out
}

// privilegesAt applies PBS's rule to one subject's entries: walk from the
// root to the path; on every node above the path the entries that
// propagate count, on the path itself all of them; a node with any entry
// that counts replaces what was inherited (so NoAccess takes a subtree
// away, and a narrower role on a subtree narrows it).
func privilegesAt(entries []catalog.ACLEntry, comps []string) Privilege {
	var privs Privilege
	node := RootPath
	for depth := 0; ; depth++ {
		leaf := depth == len(comps)
		found := false
		var here Privilege
		for _, e := range entries {
			if e.Path == node && (leaf || e.Propagate) {
				found = true
				here |= Role(e.Role).Privileges()
			}
		}
		if found {
			privs = here
		}
		if leaf {
			return privs
		}
		if depth == 0 {
			node = "/" + comps[0]
		} else {
			node += "/" + comps[depth]
		}
	}
}
