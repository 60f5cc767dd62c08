package service

import (
	"context"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
)

// WorkerConnections is the fleet's claim on the connections its workers
// reach (internal/fleet; docs/design/fleet.md, "Connections the workers
// reach"): a connection that workers reach is the workers', and a
// server never opens it. The server that runs the fleet's client sets
// it as the Remote it sets (SetRemote): fleet.Remote is both.
type WorkerConnections interface {
	// StandIn is, when a registered worker that is not lost lists
	// connection name of cfg in its reach, the connector that stands in
	// for it on the server (ok); otherwise ok is false and the server
	// opens the connection itself, as without a fleet.
	StandIn(ctx context.Context, cfg *policy.Config, name string) (c hypervisor.Connector, ok bool, err error)
	// Follow is the engine's connector for connection name, which it
	// keeps while workers come and go: at each call, the stand-in while
	// a worker reaches the connection, else the server's own (own, or
	// the one open opens at the first such call when own is nil).
	Follow(cfg *policy.Config, name string, own hypervisor.Connector, open func(context.Context) (hypervisor.Connector, error)) hypervisor.Connector
}

// ConnectionVMsOperation lists a connection's VMs live on the worker it
// is handed to (fleetops.ConnectionVMs), for the fleet's stand-in. It is
// internal (Operation.Internal): no face offers it.
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
	wc, _ := s.RemoteRunner().(WorkerConnections)
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
