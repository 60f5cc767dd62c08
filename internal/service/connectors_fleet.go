package service

import (
	"context"
	"sync"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
)

// A connection that workers reach is the workers'. A QEMU or libvirt VM
// can be read only on its own host (QMP and libvirt's NBD exports are
// Unix sockets there), so on a fleet's server such a connection is not
// opened at all: its VMs are listed on a worker that reaches it (the
// operation ConnectionVMsOperation, handed to the worker by ID), its
// leftovers are the worker's to clean when it starts, and its units run
// only on workers. The server cleaning it would, where it can reach the
// connection at all, take a worker's running snapshot for a leftover.

// WorkerConnections is the fleet's claim on the connections its workers
// reach (internal/fleet). The server that runs the fleet's client sets
// it, as the Remote it sets (SetRemote): fleet.Remote is both.
type WorkerConnections interface {
	// StandIn is, when a registered worker that is not lost lists
	// connection name of cfg in its reach, the connector that stands in
	// for it on the server (ok); otherwise ok is false and the server
	// opens the connection itself, as without a fleet.
	StandIn(ctx context.Context, cfg *policy.Config, name string) (c hypervisor.Connector, ok bool, err error)
}

// ConnectionVMsOperation lists a connection's VMs live on the worker it
// is handed to (fleetops.ConnectionVMs). It is internal: no face offers
// it, a server hands it to a worker (Operation.Internal).
const ConnectionVMsOperation = "connection-vms"

// ConnectionVMsInput is the input of ConnectionVMsOperation.
type ConnectionVMsInput struct {
	Connection string `json:"connection"`
	// Now lists without waiting for the VMs a backup holds (busy), as
	// the inventory's refresher does (hypervisor.BusyLister).
	Now bool `json:"now,omitempty"`
}

// ConnectionVMs is the document of ConnectionVMsOperation: the VMs as
// the connector listed them, in full, for the server's engine.
type ConnectionVMs struct {
	VMs []hypervisor.VM `json:"vms"`
}

// workerConnections is the fleet's claim, nil without a fleet.
func (s *Service) workerConnections() WorkerConnections {
	wc, _ := s.remoteRunner().(WorkerConnections)
	return wc
}

// standIn is the fleet's stand-in for connection name, when the
// connection is its workers'.
func (s *Service) standIn(ctx context.Context, cfg *policy.Config, name string) (hypervisor.Connector, bool, error) {
	wc := s.workerConnections()
	if wc == nil {
		return nil, false, nil
	}
	return wc.StandIn(ctx, cfg, name)
}

// fleetConnector is a connection of the server's engine on a fleet's
// server: the engine keeps it across reloads while workers come and go,
// so whose it is is decided at each use. While a registered worker, not
// lost, reaches it, every call goes to the fleet's stand-in; otherwise to
// the server's own connector, opened at the first such call (or by the
// update that made it, when no worker reached it then).
type fleetConnector struct {
	name string
	kind string
	cfg  *policy.Config
	wc   WorkerConnections
	open func(ctx context.Context) (hypervisor.Connector, error)

	mu  sync.Mutex
	own hypervisor.Connector
}

var (
	_ hypervisor.Connector  = (*fleetConnector)(nil)
	_ hypervisor.BusyLister = (*fleetConnector)(nil)
)

// current is the connector of this call: the stand-in, or the server's own.
func (c *fleetConnector) current(ctx context.Context) (hypervisor.Connector, error) {
	sc, ok, err := c.wc.StandIn(ctx, c.cfg, c.name)
	if err != nil || ok {
		return sc, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.own == nil {
		if c.own, err = c.open(ctx); err != nil {
			return nil, err
		}
	}
	return c.own, nil
}

// Kind is the connection's kind, as configured.
func (c *fleetConnector) Kind() string { return c.kind }

func (c *fleetConnector) Inventory(ctx context.Context) ([]hypervisor.VM, error) {
	cur, err := c.current(ctx)
	if err != nil {
		return nil, err
	}
	return cur.Inventory(ctx)
}

// InventoryNow lists without waiting for busy VMs when the connector
// of the call can.
func (c *fleetConnector) InventoryNow(ctx context.Context) ([]hypervisor.VM, error) {
	cur, err := c.current(ctx)
	if err != nil {
		return nil, err
	}
	if b, ok := cur.(hypervisor.BusyLister); ok {
		return b.InventoryNow(ctx)
	}
	return cur.Inventory(ctx)
}

func (c *fleetConnector) Snapshot(ctx context.Context, vm hypervisor.VMRef, req hypervisor.SnapshotRequest) (hypervisor.Session, error) {
	cur, err := c.current(ctx)
	if err != nil {
		return nil, err
	}
	return cur.Snapshot(ctx, vm, req)
}

func (c *fleetConnector) CleanupLeftovers(ctx context.Context) ([]hypervisor.Leftover, error) {
	cur, err := c.current(ctx)
	if err != nil {
		return nil, err
	}
	return cur.CleanupLeftovers(ctx)
}

// Close ends the server's own connector's session, if it was opened.
func (c *fleetConnector) Close(ctx context.Context) error {
	c.mu.Lock()
	own := c.own
	c.own = nil
	c.mu.Unlock()
	if own != nil {
		(&Connectors{Conns: map[string]hypervisor.Connector{c.name: own}}).Close()
	}
	return nil
}
