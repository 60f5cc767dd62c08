package storagesnap

import (
	"context"
	"fmt"
)

// A policy's kept storage snapshots follow its keep-storage-snapshots as
// it is now, not as it was when they were kept: when an operator lowers N
// (to 0, or removes the setting), the policy's next run deletes the ones
// beyond the newest N, even when that run keeps no new snapshot (the
// provider refused, the keep failed, or N is 0). Keep prunes only from a
// newly kept snapshot, so without this pass the older ones would stay
// forever. Deleting goes through forget, as retention and `storage-snapshots
// forget` do: journal stage "deleting" first, so a kill half-way is
// finished by the next start's Cleanup.
//
// A policy removed from the configuration has no next run: its kept
// snapshots stay, listed as orphaned, until an operator forgets them.
// Nothing here deletes a snapshot that no journal of stage "kept" names.

// RetainKept deletes the kept snapshots of policy on this router's
// connection beyond the newest retain of each datastore (retain 0 deletes
// them all), returning the labels deleted. The engine calls it at the end
// of each run of the policy.
func (r *Router) RetainKept(ctx context.Context, policy string, retain int) ([]string, error) {
	pruned, err := RetainKept(ctx, r.stateDir, policy, r.connection, retain)
	labels := make([]string, 0, len(pruned))
	for _, k := range pruned {
		labels = append(labels, k.Label)
	}
	return labels, err
}

// RetainKept deletes the kept snapshots of policy on connection beyond the
// newest retain of each datastore, and returns them, oldest first.
func RetainKept(ctx context.Context, stateDir, policy, connection string, retain int) ([]Kept, error) {
	if policy == "" || retain < 0 {
		return nil, fmt.Errorf("retaining kept storage snapshots: need a policy and a count of at least 0 (got %q, %d)", policy, retain)
	}
	return pruneWhere(ctx, stateDir, retain, func(j *journal) bool { return j.Policy == policy && j.Connection == connection })
}
