package fleet

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/service"
)

// workerList is the registry as a stand-in reads it.
type workerList interface {
	ListWorkers(ctx context.Context) ([]catalog.Worker, error)
}

var _ service.WorkerConnections = Remote{}

// StandIn implements service.WorkerConnections: a connection that a
// registered worker, not lost, lists in its reach is the workers', and
// the server holds a WorkerConnector in its place.
func (r Remote) StandIn(ctx context.Context, cfg *policy.Config, name string) (hypervisor.Connector, bool, error) {
	ws, err := r.Workers.ListWorkers(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("connection %s: whether workers reach it: %w", name, err)
	}
	if len(reaching(ws, name)) == 0 {
		return nil, false, nil
	}
	return &WorkerConnector{Connection: name, Config: cfg, Remote: r, Workers: r.Workers}, true, nil
}

// WorkerConnector stands in, on a server, for a connection the fleet's
// workers reach, which the server never opens: its VMs are listed on a
// ready worker that reaches it (service.ConnectionVMsOperation, by ID),
// its leftovers are cleaned by each worker before it registers
// (CleanupLeftovers), and its VMs are backed up only on the workers,
// where the engine places their units, a group: datastore batch whole
// (batch.go). A unit the server would run in its own process (a run of a
// server whose engine was given no worker yet) is refused; a backup of
// one VM is placed and handed off as a policy's VM is (vmunit_one.go).
type WorkerConnector struct {
	Connection string
	Config     *policy.Config // the connection's kind, and whether its VMs are bound to their host
	Remote     service.Remote
	Workers    workerList
}

var (
	_ hypervisor.Connector  = (*WorkerConnector)(nil)
	_ hypervisor.BusyLister = (*WorkerConnector)(nil)
	_ hypervisor.Restorer   = (*WorkerConnector)(nil)
)

// Kind is the connection's kind, as configured.
func (c *WorkerConnector) Kind() string {
	cc, _ := c.Config.Connection(c.Connection)
	return cc.Kind
}

// Inventory lists the connection's VMs on a ready worker that reaches it.
func (c *WorkerConnector) Inventory(ctx context.Context) ([]hypervisor.VM, error) {
	return c.list(ctx, false)
}

// InventoryNow is Inventory without waiting for the VMs a backup holds
// (hypervisor.BusyLister), for the inventory's refresher.
func (c *WorkerConnector) InventoryNow(ctx context.Context) ([]hypervisor.VM, error) {
	return c.list(ctx, true)
}

// Snapshot refuses: the connection's VMs are read on its workers only.
func (c *WorkerConnector) Snapshot(ctx context.Context, vm hypervisor.VMRef, req hypervisor.SnapshotRequest) (hypervisor.Session, error) {
	return nil, fmt.Errorf("%w: %s of connection %s: %s", hypervisor.ErrUnsupported, vm.Name, c.Connection, c.theirs(ctx, "backs up its VMs"))
}

var _ engine.WorkerBatches = (*WorkerConnector)(nil)

// BatchesOnWorkers says that the connection's group: datastore batches
// run on its workers: each batch on a worker whose reach names its
// datastore (the engine's BatchRunner, RunBatch here), which snapshots
// the VMs, takes the storage snapshot with its own provider and reads
// every VM from it, so this server needs no storage snapshot provider
// for the connection.
func (c *WorkerConnector) BatchesOnWorkers(context.Context) (bool, error) { return true, nil }

// CleanupLeftovers finds nothing: each worker cleans what its killed
// processes left on its connections before it registers
// (fleet.CleanupLeftovers). The server cleaning a worker's connection
// could take the live snapshot of the worker's running backup for one.
func (c *WorkerConnector) CleanupLeftovers(context.Context) ([]hypervisor.Leftover, error) {
	return nil, nil
}

// CreateVM refuses: a restore onto the connection runs on a worker that
// reaches it, the one the request names or the one the server chooses
// (ChooseWorker); it reaches the server's connector only when neither
// happened.
func (c *WorkerConnector) CreateVM(ctx context.Context, _ hypervisor.VMConfig, _ hypervisor.NewVMOptions) (hypervisor.NewVM, error) {
	return nil, api.Errorf(api.Invalid, "connection %s: %s: a restore onto it is handed to a ready worker that reaches it "+
		"(the one --worker or ?worker= names, else one the server chooses)", c.Connection, c.theirs(ctx, "restores onto it"))
}

// theirs says that the connection is its workers' and names them.
func (c *WorkerConnector) theirs(ctx context.Context, what string) string {
	return fmt.Sprintf("the connection is reached by workers (%s), and only a worker that reaches it %s: this server does not open it",
		c.names(ctx), what)
}

// names are the workers that reach the connection, with their states.
func (c *WorkerConnector) names(ctx context.Context) string {
	if ws, err := c.Workers.ListWorkers(ctx); err == nil && len(reaching(ws, c.Connection)) > 0 {
		return workerNames(reaching(ws, c.Connection))
	}
	return "its workers"
}

// list runs the listing on the ready workers that reach the connection,
// the one renewed last first, until one answers. A caller without a
// deadline (the inventory's refresher) gets the policies' default: a
// worker that died unnoticed would otherwise hold the listing until it
// is back.
func (c *WorkerConnector) list(ctx context.Context, now bool) ([]hypervisor.VM, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, policy.DefaultInventoryTimeout)
		defer cancel()
	}
	ws, err := c.Workers.ListWorkers(ctx)
	if err != nil {
		return nil, err
	}
	all := reaching(ws, c.Connection)
	var ready []catalog.Worker
	for _, w := range all {
		if w.State == catalog.WorkerReady {
			ready = append(ready, w)
		}
	}
	if len(ready) == 0 {
		return nil, fmt.Errorf("%w: connection %s is reached by workers (%s), none of them ready to list its VMs (this server does not open it)",
			hypervisor.ErrTransient, c.Connection, cmp.Or(workerNames(all), "none"))
	}
	slices.SortFunc(ready, func(a, b catalog.Worker) int { return b.HeartbeatAt.Compare(a.HeartbeatAt) })
	var errs []error
	for _, w := range ready {
		vms, err := c.listOn(ctx, w, hostsOf(registered(ws, c.Connection)), now)
		if err == nil {
			return vms, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// listOn lists the connection's VMs on worker w, and checks that each VM
// bound to its host is on a host that the reach of a worker registered
// for the connection names (hosts): the engine places its units by that
// host, and a unit no worker's reach names would wait for ever. A lost
// worker's hosts count: its units wait for its return, saying so ("no
// worker reaches host kvm7"), as a policy's run started before the loss
// does.
func (c *WorkerConnector) listOn(ctx context.Context, w catalog.Worker, hosts []string, now bool) ([]hypervisor.VM, error) {
	doc, err := c.Remote.RunOn(ctx, w.Name, service.ConnectionVMsOperation, &service.ConnectionVMsInput{Connection: c.Connection, Now: now})
	if err != nil {
		return nil, fmt.Errorf("listing connection %s on worker %s: %w", c.Connection, w.Name, err)
	}
	var out service.ConnectionVMs
	if err := json.Unmarshal(doc, &out); err != nil {
		return nil, api.WithClass(api.Internal, fmt.Errorf("worker %s's listing of connection %s: %w", w.Name, c.Connection, err))
	}
	reach := engine.Reach{Connections: []string{c.Connection}, Hosts: hosts}
	for _, vm := range out.VMs {
		rt := engine.RouteOf(c.Config, policy.Policy{}, c.Connection, vm)
		rt.Repository = "" // a listing writes nothing
		if !reach.Covers(rt) {
			return nil, fmt.Errorf("worker %s lists VM %s of connection %s on host %q, which no reach of the connection's workers names (%s): "+
				"set the connection's host option to the host a worker's --reach-hosts names, or name %s/%s there",
				w.Name, cmp.Or(vm.Name, vm.ID), c.Connection, vm.Host, cmp.Or(strings.Join(hosts, ", "), "no host"), c.Connection, vm.Host)
		}
	}
	return out.VMs, nil
}

// hostsOf is every host the reach of ws names.
func hostsOf(ws []catalog.Worker) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Reach.Hosts...)
	}
	return out
}

// reaching are the registered workers of ws, not lost, that list
// connection in their reach.
func reaching(ws []catalog.Worker, connection string) []catalog.Worker {
	var out []catalog.Worker
	for _, w := range registered(ws, connection) {
		if w.State != catalog.WorkerLost {
			out = append(out, w)
		}
	}
	return out
}

// registered are the registered workers of ws, lost ones included, that
// list connection in their reach.
func registered(ws []catalog.Worker, connection string) []catalog.Worker {
	var out []catalog.Worker
	for _, w := range ws {
		if slices.Contains(w.Reach.Connections, connection) {
			out = append(out, w)
		}
	}
	return out
}

// workerNames is "kvm1 (ready), kvm2 (draining)".
func workerNames(ws []catalog.Worker) string {
	names := make([]string, len(ws))
	for i, w := range ws {
		names[i] = fmt.Sprintf("%s (%s)", w.Name, w.State)
	}
	return strings.Join(names, ", ")
}
