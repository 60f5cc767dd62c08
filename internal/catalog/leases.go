package catalog

import (
	"context"
	"time"
)

// Lease is a named lease in the catalog: who holds it and until when.
type Lease struct {
	Name   string
	Holder string
	// Epoch counts the changes of holder: a new holder gets the next one.
	Epoch      int64
	AcquiredAt time.Time
	ExpiresAt  time.Time
}

// Leases let several processes sharing a catalog agree on who runs the
// scheduled jobs (Lease) and claim each scheduled run once (ClaimRun).
// Times are the callers' clocks: the hosts of processes sharing a
// catalog must keep their clocks in step (NTP).
type Leases interface {
	// AcquireLease takes the lease name for holder until now+ttl when it
	// is free, expired or already holder's (a renewal), and returns it
	// with whether holder holds it now. Of several processes acquiring
	// at once, one gets it.
	AcquireLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (Lease, bool, error)
	// ReleaseLease gives the lease up if holder holds it (a process that
	// stops lets another take over at once). The lease keeps its epoch:
	// the next holder, whoever it is, gets the one after, so an epoch
	// names one holding of the lease, ever (a fence compares it).
	ReleaseLease(ctx context.Context, name, holder string) error
	// GetLease is the lease name as it stands (ErrNotFound: never
	// taken). A released lease has no Holder and keeps its Epoch. The
	// fleet's workers compare a grant's epoch with it: a grant made under
	// an older holding of the schedules lease is stale.
	GetLease(ctx context.Context, name string) (Lease, error)
	// ClaimRun claims the run of schedule at slot for holder: true for
	// the one claim that gets it, false for any other. Claims older than
	// a week (by claim time) are forgotten by later claims, except each
	// schedule's newest (LastRun).
	ClaimRun(ctx context.Context, schedule string, slot time.Time, holder string, now time.Time) (bool, error)
	// LastRun is the newest slot of schedule any process claimed (false:
	// none): a server that starts catches up a run its schedule named
	// after it, missed while every server was down.
	LastRun(ctx context.Context, schedule string) (time.Time, bool, error)
}

// Inspection is what a read-only look at a catalog finds, changing
// nothing (`coffer upgrade check`, a server watching for a newer
// coffer's migration): the migrations applied (version: name) and the
// leases as they stand.
type Inspection struct {
	Applied map[int]string
	Leases  []Lease
}
