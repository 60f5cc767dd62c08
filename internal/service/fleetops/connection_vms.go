package fleetops

import (
	"context"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/service"
)

// ConnectionVMs lists a connection's VMs live in this process, in full:
// on a worker, for the server that handed it the listing of a connection
// the worker reaches (the fleet's stand-in, whose Inventory it is). It
// records nothing: the server stores what it needs.
func (s Ops) ConnectionVMs(ctx context.Context, in *service.ConnectionVMsInput) (service.ConnectionVMs, error) {
	cfg, err := s.EngineConfig(ctx)
	if err != nil {
		return service.ConnectionVMs{}, err
	}
	if _, ok := cfg.Connection(in.Connection); !ok {
		return service.ConnectionVMs{}, api.Errorf(api.NotFound, "no connection named %q in the configuration", in.Connection)
	}
	vms, err := s.listConnection(ctx, cfg, in.Connection, in.Now)
	return service.ConnectionVMs{VMs: vms}, err
}
