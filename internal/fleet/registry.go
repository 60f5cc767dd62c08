package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// Registrar is where a worker registers and renews: Registry over the
// catalog today; the control plane's API once workers reach it with
// worker tokens (issue 36, security).
type Registrar interface {
	Register(ctx context.Context, w Worker, now time.Time) (Worker, error)
	Heartbeat(ctx context.Context, name string, epoch int64, now time.Time) (Worker, error)
	SetState(ctx context.Context, name string, epoch int64, state catalog.WorkerState) (Worker, error)
	Deregister(ctx context.Context, name string, epoch int64) error
}

// Registry is the registrar over a catalog's worker registry.
type Registry struct{ Catalog catalog.Workers }

var _ Registrar = Registry{}

// Register checks the worker's name and protocol, then records it.
//
// The servers speak exactly Protocol: one protocol per release, and a
// worker of another one is refused here, before it has a row, an epoch or
// a queue, so it fetches nothing. This is the servers' statement because
// the registration is theirs: a protocol changes only with a catalog
// migration that the servers apply, and the registration moves behind the
// control plane (worker tokens) with the rest of the worker's writes.
// Should servers ever speak two protocols at once (the next and the
// last), they say so here, and drained workers are upgraded one by one.
func (r Registry) Register(ctx context.Context, w Worker, now time.Time) (Worker, error) {
	if err := CheckName(w.Name); err != nil {
		return Worker{}, err
	}
	if w.Protocol != Protocol {
		return Worker{}, fmt.Errorf("%w: worker %s (coffer %s) speaks fleet protocol %d, the servers speak %d: install the servers' version of coffer on it",
			ErrProtocol, w.Name, w.Version, w.Protocol, Protocol)
	}
	if w.Slots < 1 {
		return Worker{}, fmt.Errorf("fleet: worker %s needs at least one slot", w.Name)
	}
	return r.Catalog.RegisterWorker(ctx, w, now)
}

// Heartbeat renews; a catalog that refuses the worker's credential
// fences it (refused).
func (r Registry) Heartbeat(ctx context.Context, name string, epoch int64, now time.Time) (Worker, error) {
	w, err := r.Catalog.HeartbeatWorker(ctx, name, epoch, now)
	return w, refused(name, err)
}

func (r Registry) SetState(ctx context.Context, name string, epoch int64, state catalog.WorkerState) (Worker, error) {
	w, err := r.Catalog.SetWorkerState(ctx, name, epoch, state)
	return w, refused(name, err)
}

// refused wraps in catalog.ErrFenced the catalog's refusal of the
// worker's own credential: its password rejected or its role no longer
// allowed to log in (SQLSTATE class 28), or its grants taken away
// (42501). That is an operator's revocation (coffer workers token
// revoke): the worker stops at once rather than after half the dead
// interval of failed renewals, as for a catalog out of reach.
func refused(name string, err error) error {
	var pe *pgconn.PgError
	if err == nil || !errors.As(err, &pe) || (pe.Code != "28P01" && pe.Code != "28000" && pe.Code != "42501") {
		return err
	}
	return fmt.Errorf("%w: the catalog refused worker %s's credential (revoked?): %s", catalog.ErrFenced, name, pe.Message)
}

func (r Registry) Deregister(ctx context.Context, name string, epoch int64) error {
	return r.Catalog.DeregisterWorker(ctx, name, epoch)
}
