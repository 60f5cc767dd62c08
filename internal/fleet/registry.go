package fleet

import (
	"context"
	"fmt"
	"time"

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
// When a protocol 2 comes, the servers that also still speak 1 say so
// here, and drained workers are upgraded one by one.
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

func (r Registry) Heartbeat(ctx context.Context, name string, epoch int64, now time.Time) (Worker, error) {
	return r.Catalog.HeartbeatWorker(ctx, name, epoch, now)
}

func (r Registry) SetState(ctx context.Context, name string, epoch int64, state catalog.WorkerState) (Worker, error) {
	return r.Catalog.SetWorkerState(ctx, name, epoch, state)
}

func (r Registry) Deregister(ctx context.Context, name string, epoch int64) error {
	return r.Catalog.DeregisterWorker(ctx, name, epoch)
}
