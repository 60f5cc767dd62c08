package catalog

import (
	"context"
	"errors"
	"time"
)

// ErrFenced is returned to a worker whose registration is no longer the
// current one: its epoch is stale (it registered again elsewhere, or a
// newer process took its name) or it was declared lost. A fenced worker
// must stop: another may already be running its work.
var ErrFenced = errors.New("catalog: fenced")

// WorkerState is where a worker is in its life.
type WorkerState string

const (
	// WorkerStarting: registered, not yet taking work.
	WorkerStarting WorkerState = "starting"
	// WorkerReady takes work.
	WorkerReady WorkerState = "ready"
	// WorkerDraining takes no new work and ends once its running work has.
	WorkerDraining WorkerState = "draining"
	// WorkerLost stopped renewing its heartbeat; its work is re-admitted
	// elsewhere, and it may not renew again before it registers anew.
	WorkerLost WorkerState = "lost"
)

// WorkerReach is what a worker can get at: the work it can be routed.
type WorkerReach struct {
	Connections  []string `json:"connections,omitempty"`
	Hosts        []string `json:"hosts,omitempty"`
	Datastores   []string `json:"datastores,omitempty"`
	Libraries    []string `json:"libraries,omitempty"`
	Repositories []string `json:"repositories,omitempty"`
	CanBoot      bool     `json:"can_boot,omitempty"`
}

// Worker is a row of the fleet's worker registry.
type Worker struct {
	Name string
	// Epoch is raised by every registration: the fence of every write
	// the worker makes.
	Epoch    int64
	Host     string
	Version  string // coffer's
	Protocol int    // the fleet protocol the worker speaks
	Reach    WorkerReach
	Slots    int // tasks it runs at once
	State    WorkerState
	// HeartbeatAt is the worker's last renewal, RegisteredAt its last
	// registration (both by the worker's clock).
	HeartbeatAt  time.Time
	RegisteredAt time.Time
}

// Workers is the fleet's worker registry. Times are the callers' clocks,
// as for Leases.
type Workers interface {
	// RegisterWorker records w (Name, Host, Version, Protocol, Reach,
	// Slots) in state starting with now as its heartbeat, replacing an
	// earlier registration of the name, and returns it with its new
	// Epoch: the earlier one's plus one (1 for a new name), so that the
	// process registered before is fenced. The catalog checks no
	// protocol: the fleet's registry refuses the ones it does not speak.
	RegisterWorker(ctx context.Context, w Worker, now time.Time) (Worker, error)
	// HeartbeatWorker renews the worker's heartbeat to now if it is still
	// registered with epoch and not lost, and returns its row (whose
	// State tells a worker it was asked to drain). Otherwise it returns
	// an error wrapping ErrFenced.
	HeartbeatWorker(ctx context.Context, name string, epoch int64, now time.Time) (Worker, error)
	// SetWorkerState moves a worker forward, starting to ready to
	// draining, and returns its row: a move back (ready once draining)
	// leaves the state as it is. epoch 0 is any registration (an
	// operator's drain); another epoch fences the change as a heartbeat
	// is. A lost worker is fenced, a missing one ErrNotFound. lost is
	// not a state one sets: DeclareWorkersLost does.
	SetWorkerState(ctx context.Context, name string, epoch int64, state WorkerState) (Worker, error)
	// DeregisterWorker removes the worker's row if it is still
	// registered with epoch (a drained worker that stops); otherwise it
	// returns an error wrapping ErrFenced.
	DeregisterWorker(ctx context.Context, name string, epoch int64) error
	// ListWorkers lists the registry by name.
	ListWorkers(ctx context.Context) ([]Worker, error)
	// DeclareWorkersLost marks lost, in one statement, every worker not
	// yet lost whose heartbeat is older than cutoff, and returns those it
	// marked: of several servers declaring at once, each worker is
	// returned to one of them, so its work is re-admitted once.
	DeclareWorkersLost(ctx context.Context, cutoff time.Time) ([]Worker, error)
}

// RegistrationStates tells whether a worker registration is dead to a
// process that may read only its own registry row (a worker's role):
// the SQL catalogs (sqlcat/registrystate says how, and why so).
type RegistrationStates interface {
	// WorkerRegistrationGone: epoch of worker name is dead (the name is
	// gone, registered again since, or lost).
	WorkerRegistrationGone(ctx context.Context, name string, epoch int64) (bool, error)
}

// RegistrationStatesOf is c's RegistrationStates, looking through
// wrappers that keep a catalog; false when c has none.
func RegistrationStatesOf(c Catalog) (RegistrationStates, bool) { return as[RegistrationStates](c) }
