package service

import (
	"context"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/policy"
)

// LocationOf is the location of a repository of the configuration ("" is
// the default repository).
func (s *Service) LocationOf(cfg *policy.Config, name string) string {
	if rc, ok := cfg.Repository(name); ok {
		return rc.Location
	}
	return s.Config.Repository.Location
}

// CatalogLocation is where the catalog is (redacted for display).
func (s *Service) CatalogLocation() string { return catalogopen.Redact(s.catalogLocation()) }

// CatalogAddress is where the catalog is, unredacted: to reach it
// without opening it (`coffer upgrade check`, catalogopen.ReadSchema).
func (s *Service) CatalogAddress() string { return s.catalogLocation() }

func (s *Service) catalogLocation() string {
	if s.Config.Catalog != "" {
		return config.ExpandHome(s.Config.Catalog)
	}
	return catalogopen.DefaultLocation()
}

// OpenCatalog opens the catalog, or hands out the one kept open
// (Config.OpenCatalog), whose Close then leaves it open.
func (s *Service) OpenCatalog(ctx context.Context) (catalog.Catalog, error) {
	if s.Config.OpenCatalog != nil {
		return keptOpen{s.Config.OpenCatalog}, nil
	}
	loc := s.catalogLocation()
	c, err := catalogopen.OpenWith(ctx, loc, s.exportBeforeMigrating)
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

// catalogTimeout bounds how long an operation that changed the repository
// waits for the catalog (an unreachable PostgreSQL server, a SQLite file
// locked by a stuck process).
const catalogTimeout = 30 * time.Second

// UsageWindow is how far back a repository's usage trend, and the
// planner's capacity forecast, read the samples.
const UsageWindow = 30 * 24 * time.Hour
