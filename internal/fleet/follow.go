package fleet

import (
	"context"
	"sync"

	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/service"
)

// Follow implements service.WorkerConnections: the engine's connector
// for a connection, whose it is decided at each call.
func (r Remote) Follow(cfg *policy.Config, name string, own hypervisor.Connector,
	open func(context.Context) (hypervisor.Connector, error)) hypervisor.Connector {
	return &followed{remote: r, cfg: cfg, name: name, own: own, open: open}
}

// followed is a connection of a fleet's server's engine, which keeps it
// across reloads while workers come and go: while a registered worker,
// not lost, reaches the connection, each call goes to the stand-in
// (WorkerConnector); otherwise to the server's own connector, opened at
// the first such call if the server had not opened it already.
type followed struct {
	remote Remote
	cfg    *policy.Config
	name   string
	open   func(context.Context) (hypervisor.Connector, error)

	mu  sync.Mutex
	own hypervisor.Connector
}

var (
	_ hypervisor.Connector  = (*followed)(nil)
	_ hypervisor.BusyLister = (*followed)(nil)
)

// current is the connector of this call.
func (c *followed) current(ctx context.Context) (hypervisor.Connector, error) {
	sc, theirs, err := c.remote.StandIn(ctx, c.cfg, c.name)
	if err != nil || theirs {
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
func (c *followed) Kind() string {
	cc, _ := c.cfg.Connection(c.name)
	return cc.Kind
}

func (c *followed) Inventory(ctx context.Context) ([]hypervisor.VM, error) {
	cur, err := c.current(ctx)
	if err != nil {
		return nil, err
	}
	return cur.Inventory(ctx)
}

// InventoryNow lists without waiting for busy VMs when the connector of
// the call can.
func (c *followed) InventoryNow(ctx context.Context) ([]hypervisor.VM, error) {
	cur, err := c.current(ctx)
	if err != nil {
		return nil, err
	}
	if b, ok := cur.(hypervisor.BusyLister); ok {
		return b.InventoryNow(ctx)
	}
	return cur.Inventory(ctx)
}

func (c *followed) Snapshot(ctx context.Context, vm hypervisor.VMRef, req hypervisor.SnapshotRequest) (hypervisor.Session, error) {
	cur, err := c.current(ctx)
	if err != nil {
		return nil, err
	}
	return cur.Snapshot(ctx, vm, req)
}

var _ engine.WorkerBatches = (*followed)(nil)

// BatchesOnWorkers says whether the connection's batches run on its
// workers: while it is the workers' (WorkerConnector.BatchesOnWorkers).
func (c *followed) BatchesOnWorkers(ctx context.Context) (bool, error) {
	cur, err := c.current(ctx)
	if err != nil {
		return false, err
	}
	if wb, ok := cur.(engine.WorkerBatches); ok {
		return wb.BatchesOnWorkers(ctx)
	}
	return false, nil
}

func (c *followed) CleanupLeftovers(ctx context.Context) ([]hypervisor.Leftover, error) {
	cur, err := c.current(ctx)
	if err != nil {
		return nil, err
	}
	return cur.CleanupLeftovers(ctx)
}

// Close ends the server's own connector's session, if it was opened.
func (c *followed) Close(context.Context) error {
	c.mu.Lock()
	own := c.own
	c.own = nil
	c.mu.Unlock()
	if own != nil {
		(&service.Connectors{Conns: map[string]hypervisor.Connector{c.name: own}}).Close()
	}
	return nil
}
