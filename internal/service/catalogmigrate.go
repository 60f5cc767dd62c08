package service

import (
	"context"
	"fmt"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogexport"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/version"
)

// exportBeforeMigrating exports the catalog's state into the default
// repository before a new coffer migrates the catalog (issue 39): an
// upgrade that goes wrong is undone by the previous coffer importing it.
// Without a repository configured there is nowhere to export to, and the
// migration goes on; with one, an export that fails stops the migration,
// which leaves the catalog as it was.
func (s *Service) exportBeforeMigrating(ctx context.Context, d catalog.Dumper, from, to int) error {
	if s.Config.Repository.Location == "" {
		return nil
	}
	m, err := WithRepo(ctx, s, DefaultRepo(), NoLease, func(r *repo.Repository) (catalogexport.Manifest, error) {
		return catalogexport.Export(ctx, d, r, catalogexport.Options{Reason: "before-migration", Coffer: version.Get().Version})
	})
	if err != nil {
		return fmt.Errorf("export the catalog into the repository first: %w (the catalog is left as it was: make the repository reachable, or run the previous coffer)", err)
	}
	s.log.Info("catalog exported into the repository before its migration", "export", m.ID, "from", from, "to", to, "rows", m.Rows())
	return nil
}
