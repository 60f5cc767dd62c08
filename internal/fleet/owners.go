package fleet

import (
	"context"
	"fmt"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// OwnerGone tells, from the registry, whether the worker registration a
// SessionOwner string names is dead: its worker is gone from the registry
// (it deregistered, or never was), registered again since (a higher
// epoch: the process that held the named one is fenced), or lost (the
// leader gave its work to others, and the worker fenced itself before).
// A registration still current and not lost is alive, even with a late
// heartbeat: its work may still run until the leader declares it lost. A
// unit passes it to the hypervisor (backup.VMRequest.OwnerGone), so that
// a VM snapshot a killed worker left is removed by the retry elsewhere.
//
// A worker's role reads only its own row of the registry: listing it,
// every other worker would look gone, and a live one's snapshot would be
// removed. A catalog that can say it of one registration
// (catalog.RegistrationStates: a function that answers only that, the
// least a worker must know) is asked instead.
func OwnerGone(workers catalog.Workers) func(ctx context.Context, owner string) (bool, error) {
	var states catalog.RegistrationStates
	if c, ok := workers.(catalog.Catalog); ok {
		states, _ = catalog.RegistrationStatesOf(c)
	}
	return func(ctx context.Context, owner string) (bool, error) {
		name, epoch, ok := parseOwner(owner)
		if !ok {
			return false, fmt.Errorf("%q names no worker registration", owner)
		}
		if states != nil {
			return states.WorkerRegistrationGone(ctx, name, epoch)
		}
		ws, err := workers.ListWorkers(ctx)
		if err != nil {
			return false, err
		}
		for _, w := range ws {
			if w.Name == name {
				return w.Epoch > epoch || w.Epoch == epoch && w.State == catalog.WorkerLost, nil
			}
		}
		return true, nil
	}
}

// parseOwner reads the worker registration a SessionOwner string names.
func parseOwner(owner string) (name string, epoch int64, ok bool) {
	if _, err := fmt.Sscanf(owner, "worker %s epoch %d", &name, &epoch); err != nil || SessionOwner(name, epoch) != owner {
		return "", 0, false
	}
	return name, epoch, true
}
