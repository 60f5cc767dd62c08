package service

import (
	"net/http"

	"github.com/coffer-backup/coffer/internal/auth"
)

// Operation is one use case every face offers, defined once (PBS's
// #[api] in Go): the command line runs it through a command, the REST API
// through the route registered from this entry, both calling the service
// method named here. ID is the operation's one name: the CLI's commands
// declare the IDs they run, the server registers its routes by them, the
// audit log records them and they are the OpenAPI operationIds; a test
// fails when a face lacks one.
type Operation struct {
	ID string
	// Method is the *Service method that runs it.
	Method  string
	Summary string

	// HTTP is the route: method and path below /api/v1, with {name}
	// parameters.
	HTTP, Path string
	// Requires are the privileges the caller must hold, each on an ACL
	// object whose {name} parameters come from the request's path or
	// query; they are checked before the endpoint runs. SelfService says
	// instead why the operation declares none: internal/auth checks its
	// own rules with the caller passed in (one's password, one's tokens),
	// or it is how a caller signs in at all.
	Requires    []Requirement
	SelfService string
	// Public operations need no credentials: signing in, out, and the
	// first choice of a password with a setup link.
	Public bool
	// AuditsItself: the operation records itself (and its refusals) in
	// the transaction that makes the change (internal/auth's, the
	// configuration objects': RecordsOwnAudit); the server records every
	// other mutating operation.
	AuditsItself bool
	// DuringSignIn: a session still waiting for its second step (or sent
	// to enrol a second factor) may call it; every other operation
	// refuses such a session.
	DuringSignIn bool
	// Endpoint binds the operation to HTTP.
	Endpoint Registrar
	// MaxBodyBytes bounds the request body (0: 64 KiB).
	MaxBodyBytes int64
	// NotOnCommandLine says why the command line does not offer the
	// operation (it belongs to a browser session).
	NotOnCommandLine string
	// NoConsole says why the web console offers no page or action that
	// runs the operation (cmd/coffer's faces test holds the rest to it).
	NoConsole string
	// Internal says why no face offers the operation at all: coffer's
	// own processes run it by ID (a server hands it to a worker). It
	// has no route, no privileges (no request reaches it) and no command.
	Internal string
}

// Mutating reports an operation that changes something: every one of
// them is recorded in the audit log.
func (o Operation) Mutating() bool { return o.HTTP != http.MethodGet }

// Requirement is a privilege on an ACL object.
type Requirement struct {
	Privilege auth.Privilege
	// Object is an ACL path template: "/repositories/{repo}". A
	// parameter left empty ends the path before it ("/connections/{c}"
	// with no c is "/connections").
	Object string
	Reach  Reach
}

// Reach says how a requirement reaches its object.
type Reach int

const (
	// OnObject: the privilege on the object itself (inherited as the ACL
	// says).
	OnObject Reach = iota
	// ThroughVM: the object is a repository holding the request's
	// {point}; the privilege on the point's VM is enough too (a tenant
	// restores its VMs' points from a shared repository).
	ThroughVM
	// Listing: the operation lists items and shows only those the caller
	// holds the privilege on; it is refused only when the caller holds it
	// nowhere at or below the object (nor, for repository privileges, on
	// any VM).
	Listing
)

// Paths of the objects operations check, for the domains' tables.
const (
	OnRepo   = "/repositories/{repo}"
	OnConns  = auth.ConnectionsPath
	OnPolicy = "/policies/{policy}"
)

// Require is a privilege the caller must hold on object.
func Require(p auth.Privilege, object string) []Requirement {
	return []Requirement{{Privilege: p, Object: object}}
}

// Lists is a listing's privilege: the items shown are those the caller
// holds it on (Listing).
func Lists(p auth.Privilege, object string) []Requirement {
	return []Requirement{{Privilege: p, Object: object, Reach: Listing}}
}

// ReadPoint is reading data out of a repository's point.
var ReadPoint = Requirement{Privilege: auth.RepoRead, Object: OnRepo, Reach: ThroughVM}

// The HTTP methods of the routes, and the unit of MaxBodyBytes, as the
// domains' tables spell them.
const (
	Get, Post, Put, Delete = http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete
	KiB                    = 1 << 10
)
