package workerops

import (
	"context"

	"github.com/coffer-backup/coffer/internal/fleet"
)

// RemoveLostOwners runs on a worker reaching a connection, handed off by
// the leader when it declares other workers lost: the snapshots those
// left on the connection's VMs are removed, and the VMs they suspended
// powered back on (fleet.CleanupAfterLost).
func (s Ops) RemoveLostOwners(ctx context.Context, in *fleet.LostOwners) (*fleet.LostOwnersRemoved, error) {
	return fleet.RemoveLostOwners(ctx, s.Service, in, s.Logger())
}
