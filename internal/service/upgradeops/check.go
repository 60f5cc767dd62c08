package upgradeops

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/leader"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/version"
)

// CheckUpgrade looks at the catalog, the configured repositories and the
// configuration file, changing nothing: the catalog is read without
// being opened (opening it migrates it), the repositories' plaintext
// config without their keys.
func (s Ops) CheckUpgrade(ctx context.Context, _ *api.UpgradeCheckInput) (*api.UpgradeCheck, error) {
	doc := &api.UpgradeCheck{Version: version.Get().Version, LeaseHolders: []api.LeaseHolder{},
		Repositories: []api.RepositoryFormat{}, DeprecatedKeys: []api.DeprecatedKey{}, Ready: true}
	doc.Catalog = s.catalogSchema(ctx, doc)
	for _, r := range s.repositories() {
		f := s.repositoryFormat(ctx, r.name, r.location)
		doc.Ready = doc.Ready && (f.State == "same" || f.State == "older" || f.State == "missing")
		doc.Repositories = append(doc.Repositories, f)
	}
	keys, err := s.deprecatedKeys()
	if err != nil {
		return nil, err
	}
	doc.DeprecatedKeys = keys
	return doc, nil
}

// catalogSchema reads the catalog's schema and leases; the leases held
// by another version go into doc.
func (s Ops) catalogSchema(ctx context.Context, doc *api.UpgradeCheck) api.CatalogSchema {
	out := api.CatalogSchema{Location: s.CatalogLocation(), Pending: []string{}}
	sc, err := catalogopen.ReadSchema(ctx, s.CatalogAddress())
	out.Schema, out.Known = sc.Applied, sc.Known
	for _, m := range sc.Pending {
		out.Pending = append(out.Pending, fmt.Sprintf("%04d_%s", m.Version, m.Name))
	}
	if errors.Is(err, catalog.ErrNewerSchema) {
		out.Newer = true
	}
	if err != nil {
		out.Error = err.Error()
		doc.Ready = false
	}
	now := time.Now()
	for _, l := range sc.Leases {
		if l.Holder == "" || !l.ExpiresAt.After(now) {
			continue // released or expired: nobody holds it
		}
		if v := leader.HolderVersion(l.Holder); v != doc.Version {
			doc.LeaseHolders = append(doc.LeaseHolders, api.LeaseHolder{Lease: l.Name, Holder: l.Holder, Version: v, ExpiresAt: l.ExpiresAt})
		}
	}
	return out
}

type namedRepo struct{ name, location string }

// repositories are the default repository and those of the configuration
// file's repositories section, each once.
func (s Ops) repositories() []namedRepo {
	var out []namedRepo
	seen := map[string]bool{}
	add := func(name, loc string) {
		if loc != "" && !seen[loc] {
			seen[loc] = true
			out = append(out, namedRepo{name, loc})
		}
	}
	add("default", s.Config.Repository.Location)
	if s.Config.Engine != nil {
		for _, r := range s.Config.Engine.Repositories {
			add(r.Name, r.Location)
		}
	}
	return out
}

// repositoryFormat reads a repository's plaintext config: its format
// version, which needs no key.
func (s Ops) repositoryFormat(ctx context.Context, name, location string) api.RepositoryFormat {
	f := api.RepositoryFormat{Name: name, Location: location, Supported: repo.FormatVersion}
	st, err := s.OpenStore(ctx, location)
	if errors.Is(err, repo.ErrNotRepository) {
		f.State = "missing"
		return f
	}
	if err != nil {
		f.State, f.Error = "unreachable", err.Error()
		return f
	}
	defer func() { _ = st.Close() }()
	cfg, err := repo.ReadConfig(ctx, st)
	f.FormatVersion = cfg.FormatVersion
	switch {
	case errors.Is(err, repo.ErrUnsupportedVersion):
		f.State, f.Error = "newer", err.Error()
	case errors.Is(err, repo.ErrNotRepository):
		f.State, f.FormatVersion = "missing", 0
	case err != nil:
		f.State, f.Error = "unreachable", err.Error()
	case cfg.FormatVersion < repo.FormatVersion:
		f.State = "older"
	default:
		f.State = "same"
	}
	return f
}

// deprecatedKeys are the deprecated keys the configuration file uses.
func (s Ops) deprecatedKeys() ([]api.DeprecatedKey, error) {
	out := []api.DeprecatedKey{}
	path := s.Config.EngineSource
	if path == "" {
		return out, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	found, err := config.DeprecatedIn(b, config.Deprecated)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, d := range found {
		out = append(out, api.DeprecatedKey{Key: d.Key, File: path, Since: d.Since, Instead: d.Instead})
	}
	return out, nil
}
