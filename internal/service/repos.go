package service

import (
	"context"
	"fmt"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
)

// password asks a password source (nil: no password).
func password(src PasswordSource) ([]byte, error) {
	if src == nil {
		return nil, nil
	}
	return src()
}

// openRepository opens the default repository.
func (s *Service) openRepository(ctx context.Context) (*repo.Repository, error) {
	pw, err := password(s.cfg.Repository.Password)
	if err != nil {
		return nil, err
	}
	r, err := s.openRepositoryAt(ctx, s.cfg.Repository.Location, pw)
	if err == nil {
		s.repoIDs.learn(r.Config().ID, s.boundRepo)
	}
	return r, err
}

// openOther opens a second repository (copy target, key source) with the
// other password.
func (s *Service) openOther(ctx context.Context, location string) (*repo.Repository, error) {
	pw, err := password(s.cfg.OtherPassword)
	if err != nil {
		return nil, err
	}
	return s.openRepositoryAt(ctx, location, pw)
}

// openAt opens the repository at location with the default repository's
// password ("" is the default repository).
func (s *Service) openAt(ctx context.Context, location string) (*repo.Repository, error) {
	if location == "" {
		return s.openRepository(ctx)
	}
	pw, err := password(s.cfg.Repository.Password)
	if err != nil {
		return nil, err
	}
	return s.openRepositoryAt(ctx, location, pw)
}

func (s *Service) openRepositoryAt(ctx context.Context, location string, pw []byte) (*repo.Repository, error) {
	st, err := s.OpenStore(ctx, location)
	if err != nil {
		return nil, err
	}
	r, err := repo.Open(ctx, st, pw, repo.Options{Logger: s.log})
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	return r, nil
}

// openNamed opens a repository of the configuration by name: "" is the
// default repository, others come from the repositories section with
// their own password files (or the default password).
func (s *Service) openNamed(ctx context.Context, name string) (*repo.Repository, error) {
	if name == "" {
		return s.openRepository(ctx)
	}
	st, err := s.latest(ctx)
	if err != nil {
		return nil, err
	}
	return s.openNamedIn(ctx, st.Engine, name)
}

// openNamedIn opens a repository of cfg by name.
func (s *Service) openNamedIn(ctx context.Context, cfg *policy.Config, name string) (*repo.Repository, error) {
	if name == "" {
		return s.openRepository(ctx)
	}
	if _, ok := cfg.Repository(name); !ok {
		return nil, invalidf("no repository named %q in the configuration", name)
	}
	named, err := s.forRepositoryIn(cfg, name)
	if err != nil {
		return nil, err
	}
	return named.openRepository(ctx)
}

// locationOf is the location of a repository of the configuration ("" is
// the default repository).
func (s *Service) locationOf(cfg *policy.Config, name string) string {
	if rc, ok := cfg.Repository(name); ok {
		return rc.Location
	}
	return s.cfg.Repository.Location
}

// point is a backup point opened for reading under a restore lease.
type point struct {
	r       *repo.Repository
	snap    *repo.Snapshot
	release func()
}

// openPoint opens the default repository for reading backup point ref: it
// takes a restore lease first (garbage collection keeps the point's data
// while it is read, even if the point is forgotten meanwhile), then finds
// the point. release ends the lease, also after ctx was cancelled, and
// closes the repository.
func (s *Service) openPoint(ctx context.Context, ref, purpose string) (*point, error) {
	r, err := s.openRepository(ctx)
	if err != nil {
		return nil, err
	}
	lease, err := r.AcquireLease(ctx, "restore", "", purpose, false)
	if err != nil {
		_ = r.Close()
		return nil, err
	}
	release := func() {
		lease.Release(context.WithoutCancel(ctx))
		_ = r.Close()
	}
	snap, err := r.FindSnapshot(ctx, ref)
	if err != nil {
		release()
		return nil, err
	}
	return &point{r: r, snap: snap, release: release}, nil
}

// CatalogLocation is where the catalog is (redacted for display).
func (s *Service) CatalogLocation() string { return catalogopen.Redact(s.catalogLocation()) }

func (s *Service) catalogLocation() string {
	if s.cfg.Catalog != "" {
		return config.ExpandHome(s.cfg.Catalog)
	}
	return catalogopen.DefaultLocation()
}

// openCatalog opens the catalog, or hands out the one kept open
// (Config.OpenCatalog), whose Close then leaves it open.
func (s *Service) openCatalog(ctx context.Context) (catalog.Catalog, error) {
	if s.cfg.OpenCatalog != nil {
		return keptOpen{s.cfg.OpenCatalog}, nil
	}
	loc := s.catalogLocation()
	c, err := catalogopen.Open(ctx, loc)
	if err != nil {
		return nil, fmt.Errorf("open catalog %s: %w", catalogopen.Redact(loc), err)
	}
	return c, nil
}

// keptOpen is a catalog its user must not close: the process's own.
type keptOpen struct{ catalog.Catalog }

func (keptOpen) Close() error { return nil }

// Unwrap is the catalog kept open (what it keeps beside Catalog: usage).
func (k keptOpen) Unwrap() catalog.Catalog { return k.Catalog }

// openNamedRepo opens a repository by the name maintenance and task
// objects use: "" and "default" are the default repository, any other a
// repositories entry.
func (s *Service) openNamedRepo(ctx context.Context, name string) (*repo.Repository, error) {
	if name == "default" {
		name = ""
	}
	return s.openNamed(ctx, name)
}
