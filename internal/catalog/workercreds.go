package catalog

import (
	"context"
	"errors"
	"time"
)

// ErrNewerSchema: the catalog was migrated by a newer coffer than this
// one (class unsupported-version, exit code 8).
var ErrNewerSchema = errors.New("catalog: migrated by a newer coffer")

// ErrNeedsPostgres refuses what only a PostgreSQL catalog offers: the
// fleet's workers, their hand-off (River) and their credentials.
var ErrNeedsPostgres = errors.New("catalog: workers need a PostgreSQL catalog")

// WorkerGroupRole is the PostgreSQL role (NOLOGIN) every worker's login
// role is a member of: the grants of a worker are this role's alone, so
// that one statement cuts a worker off (its membership revoked) and a
// worker's role holds nothing of its own.
const WorkerGroupRole = "coffer_worker"

// WorkerQueueSchema is the schema of the fleet's queue (River's tables),
// to which the workers' role is granted access: internal/fleet/queue's
// Schema (a test in internal/fleet holds them equal; the catalog does not
// import the queue).
const WorkerQueueSchema = "river"

// MaxWorkerRoleName bounds the name of a worker that has a credential:
// its role, "coffer_worker_<name>", must fit PostgreSQL's 63 bytes.
const MaxWorkerRoleName = 63 - len(WorkerGroupRole+"_")

// WorkerRole is the login role of worker name.
func WorkerRole(name string) string { return WorkerGroupRole + "_" + name }

// CredentialState is whether a worker has a credential to log in with.
type CredentialState string

const (
	CredentialNone    CredentialState = "none"
	CredentialActive  CredentialState = "active"
	CredentialRevoked CredentialState = "revoked"
)

// Revoked is what revoking a worker's credential did.
type Revoked struct {
	// Sessions is the number of the worker's database sessions ended.
	Sessions int
	// Expired: the worker was registered and not yet lost; its heartbeat
	// was set far in the past, so the servers' watch declares it lost at
	// its next look and its running units are re-admitted.
	Expired bool
}

// WorkerCredentials are the workers' own logins to the catalog: a
// PostgreSQL login role per worker, member of WorkerGroupRole, whose
// grants reach the queue, the worker's own registry row, the events of
// the jobs and the configuration objects, and nothing else
// (docs/design/fleet.md, "Worker credentials"). A SQLite catalog offers
// none: its methods return ErrNeedsPostgres.
type WorkerCredentials interface {
	// SetWorkerCredential creates worker's role, or re-keys it and lets
	// it log in again, with the password secret, and (re)states the
	// group role's grants. Only the password's SCRAM verifier reaches
	// the database server (and so its statement log).
	SetWorkerCredential(ctx context.Context, worker, secret string) error
	// RevokeWorkerCredential stops worker's role from logging in, takes
	// its grants away (its open sessions lose them at their next
	// statement), ends its sessions, and expires the worker's heartbeat
	// (the epoch of the Unix clock, shown as such). A worker with no
	// credential is ErrNotFound.
	RevokeWorkerCredential(ctx context.Context, worker string) (Revoked, error)
	// WorkerCredentials lists the workers that have a role, active or
	// revoked, by name.
	WorkerCredentials(ctx context.Context) (map[string]CredentialState, error)
	// ProtectWorkerQueue states the workers' group grants again (those of
	// this coffer, so that tokens made by an older one keep working) and
	// confines the group to each worker's own queue in River's job table
	// (row policies), once the group exists; a server calls it after
	// migrating River's schema.
	ProtectWorkerQueue(ctx context.Context) error
}

// RevokedHeartbeat is the heartbeat a revoked worker is given: older
// than any dead interval.
var RevokedHeartbeat = time.Unix(0, 0).UTC()

// WorkerCredentialsOf is c's worker credentials, looking through
// wrappers that keep a catalog (Unwrap() Catalog); false when c has none.
func WorkerCredentialsOf(c Catalog) (WorkerCredentials, bool) { return as[WorkerCredentials](c) }
