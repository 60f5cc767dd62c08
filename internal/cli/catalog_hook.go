package cli

import (
	"context"

	"github.com/coffer-backup/coffer/internal/repo"
)

// pointRecorder records a new backup point in the catalog; the catalog
// wiring sets it. The repository stays the source of truth: a failure
// here is a warning, and `coffer catalog rebuild` repairs the catalog.
var pointRecorder func(ctx context.Context, a *app, r *repo.Repository, s *repo.Snapshot) error

func (a *app) recordPoint(ctx context.Context, r *repo.Repository, s *repo.Snapshot) {
	if pointRecorder == nil || s == nil {
		return
	}
	if err := pointRecorder(ctx, a, r, s); err != nil {
		a.log.Warn("backup point not recorded in the catalog (run `coffer catalog rebuild`)", "snapshot", s.ID.Short(), "err", err)
	}
}
