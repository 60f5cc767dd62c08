package engine

import (
	"context"
	"fmt"
	"strings"
)

// keptRetainer is implemented by the storage snapshotters that keep
// storage snapshots for policies (storagesnap.Router): it deletes a
// policy's kept snapshots on its connection beyond the newest retain of
// each datastore, 0 meaning all of them, through the same crash-safe path
// as any deletion of a kept snapshot.
type keptRetainer interface {
	RetainKept(ctx context.Context, policy string, retain int) (deleted []string, err error)
}

// retainKeptStorage applies keep-storage-snapshots as the policy says it
// now, at the end of each of its runs: a kept snapshot is pruned when the
// next one is kept, so without this pass lowering N to 0 (or a run whose
// snapshot could not be kept) would leave the older ones forever. Unlike
// the repository's retention it runs after failed runs too: it counts
// snapshots, never ages them, so the newest N always stay. A cancelled
// run leaves it to the next.
func (j *Job) retainKeptStorage(ctx context.Context) {
	if j.one != nil || j.ctx.Err() != nil {
		return
	}
	n := max(j.p.KeepStorageSnapshots, 0)
	for _, c := range j.p.ConnectionNames() {
		r, ok := j.s.storage[c].(keptRetainer)
		if !ok {
			continue
		}
		deleted, err := r.RetainKept(ctx, j.p.Name, n)
		fields := map[string]any{"connection": c, "keep": n, "deleted": deleted}
		if err != nil {
			j.event("warn", "storage-snapshot-retention", fmt.Sprintf("policy %s keeps %d storage snapshots per datastore; deleting older ones on %s failed after %d (retried after the next run): %v",
				j.p.Name, n, c, len(deleted), err), fields)
			continue
		}
		if len(deleted) > 0 {
			j.event("info", "storage-snapshot-retention", fmt.Sprintf("policy %s keeps %d storage snapshots per datastore: %d older kept on %s deleted (%s)",
				j.p.Name, n, len(deleted), c, strings.Join(deleted, ", ")), fields)
		}
	}
}
