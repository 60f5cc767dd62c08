package engine

import (
	"context"
	"fmt"

	"github.com/coffer-backup/coffer/internal/forget"
)

// applyRetention forgets, per VM, the backup points of this policy that its
// keep rules no longer want. It runs only after a job backed up at least
// one VM, so a failing policy never thins out its own history. Only points
// tagged with this policy are considered; chunks are reclaimed later by
// garbage collection, which never blocks backups.
func (j *Job) applyRetention(ctx context.Context) {
	if j.p.Retention.Empty() || j.r == nil {
		return
	}
	groups, err := forget.Run(ctx, j.r, forget.Options{Policy: j.p.Retention, Tags: map[string]string{"policy": j.p.Name}})
	var removed []string
	for _, g := range groups {
		for _, d := range g.Remove {
			removed = append(removed, d.ID)
		}
		for _, l := range g.Locked {
			j.event("info", "retention", l.String(), nil)
		}
	}
	if len(removed) > 0 {
		if derr := j.e.o.Catalog.DeleteBackupPoints(ctx, j.r.Config().ID, removed); derr != nil {
			j.e.log.Warn("removing forgotten points from the catalog failed", "err", derr)
		}
	}
	if err != nil {
		j.event("error", "retention", fmt.Sprintf("applying retention (%s) failed after removing %d points: %v", j.p.Retention, len(removed), err), nil)
		return
	}
	j.event("info", "retention", fmt.Sprintf("retention (%s): %d points removed", j.p.Retention, len(removed)),
		map[string]any{"removed": len(removed)})
}
