package cli

import (
	"context"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog/rebuild"
	"github.com/coffer-backup/coffer/internal/repo"
)

// recordTimeout bounds how long a finished backup waits for the catalog
// (an unreachable PostgreSQL server, a SQLite file locked by a stuck
// process).
const recordTimeout = 30 * time.Second

// recordPoint records a new backup point in the catalog. The repository
// stays the source of truth: a failure here is a warning, and
// `coffer catalog rebuild` repairs the catalog.
func (a *app) recordPoint(ctx context.Context, r *repo.Repository, s *repo.Snapshot) {
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, recordTimeout)
	defer cancel()
	c, err := a.openCatalog(ctx)
	if err == nil {
		err = rebuild.Record(ctx, c, r, s)
		_ = c.Close()
	}
	if err != nil {
		a.log.Warn("backup point not recorded in the catalog (run `coffer catalog rebuild`)", "snapshot", s.ID.Short(), "err", err)
	}
}
