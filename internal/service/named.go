package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
)

var catalogOne = catalog.JobFilter{Limit: 1}

// DefaultRepository names the repository of the top-level repository
// setting, as the API's paths and ACL paths do (/repositories/default),
// unless the repositories section defines a repository of that name.
const DefaultRepository = "default"

// repoIDs maps the IDs of repositories opened so far to their names.
type repoIDs struct {
	mu sync.Mutex
	m  map[string]string
}

func (r *repoIDs) learn(id, name string) {
	r.mu.Lock()
	r.m[id] = name
	r.mu.Unlock()
}

// idOf is the ID of the repository opened under name ("" when none is).
func (r *repoIDs) idOf(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, n := range r.m {
		if n == name {
			return id
		}
	}
	return ""
}

// RepositoryID is the ID of the repository ref names: the catalog keeps
// points by repository ID, the API and the console name repositories. A
// ref that is an ID this server knows, or no repository's name, is taken
// as an ID.
func (s *Service) RepositoryID(ctx context.Context, ref string) (string, error) {
	if ref == "" || s.RepositoryName(ref) != "" {
		return ref, nil
	}
	if id := s.repoIDs.idOf(ref); id != "" {
		return id, nil
	}
	named, err := s.ForRepository(ctx, ref)
	if c, _ := api.ClassOf(err); c == api.NotFound {
		return ref, nil
	}
	if err != nil {
		return "", err
	}
	return WithRepo(ctx, named, DefaultRepo(), NoLease, func(r *repo.Repository) (string, error) {
		return r.Config().ID, nil
	})
}

// RepositoryNames are the repositories this service opens by name in
// cfg: its repositories section's (the configuration in effect, the
// catalog's too), and "default" for the repository setting.
func (s *Service) RepositoryNames(cfg *policy.Config) []string {
	var out []string
	if s.Config.Repository.Location != "" {
		out = append(out, DefaultRepository)
	}
	for _, r := range cfg.Repositories {
		if !slices.Contains(out, r.Name) {
			out = append(out, r.Name)
		}
	}
	return out
}

// RepositoryNamesInEffect are the repositories of the configuration in
// effect now (the file's and the API's): what the console offers to
// pick from. None when the configuration cannot be read.
func (s *Service) RepositoryNamesInEffect(ctx context.Context) []string {
	st, err := s.ReadConfig(ctx)
	if err != nil {
		return nil
	}
	return s.RepositoryNames(st.Engine)
}

// RepositoryName is the name of the repository with this ID, when a
// service of this server has opened it; "" otherwise.
func (s *Service) RepositoryName(id string) string {
	s.repoIDs.mu.Lock()
	defer s.repoIDs.mu.Unlock()
	return s.repoIDs.m[id]
}

// ForRepository returns the service whose default repository is the one
// the configuration in effect names: every repository operation then
// works on it.
func (s *Service) ForRepository(ctx context.Context, name string) (*Service, error) {
	st, err := s.ConfigInEffect(ctx)
	if err != nil {
		return nil, err
	}
	named, err := s.forRepositoryIn(st.Engine, name)
	if c, _ := api.ClassOf(err); c == api.NotFound {
		// Created through the API a moment ago, before this process's
		// watcher read it: read the catalog's configuration now.
		if st, err = s.ReadConfig(ctx); err != nil {
			return nil, err
		}
		named, err = s.forRepositoryIn(st.Engine, name)
	}
	return named, err
}

// forRepositoryIn is ForRepository for a repository of cfg.
func (s *Service) forRepositoryIn(cfg *policy.Config, name string) (*Service, error) {
	loc, err := s.namedLocation(cfg, name)
	if err != nil {
		return nil, err
	}
	c := *s
	c.Config.Repository = loc
	c.BoundRepo = name
	return &c, nil
}

// namedLocation is a repository of cfg: its repositories section's (with
// its own password file, or the default password), or the repository
// setting for "default" ("" is the default repository).
func (s *Service) namedLocation(cfg *policy.Config, name string) (Location, error) {
	if rc, ok := cfg.Repository(name); ok && name != "" {
		pw := s.Config.Repository.Password
		if rc.PasswordFile != "" {
			file := config.ExpandHome(rc.PasswordFile)
			pw = func() ([]byte, error) {
				b, err := os.ReadFile(file)
				if err != nil {
					return nil, Invalidf("repository %s: password file: %v", name, err)
				}
				return []byte(strings.TrimRight(string(b), "\r\n")), nil
			}
		}
		return Location{Location: rc.Location, Password: pw}, nil
	}
	if (name == "" || name == DefaultRepository) && s.Config.Repository.Location != "" {
		return s.Config.Repository, nil
	}
	return Location{}, api.Errorf(api.NotFound, "no repository named %q here (the configured ones: %s)", name,
		orNone(s.RepositoryNames(cfg)))
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// Ready checks that the catalog answers and every configured
// repository's storage is reachable and holds a repository: what the
// server's /readyz reports. The storage alone is checked (no password,
// no key derivation), so it is cheap enough to poll.
func (s *Service) Ready(ctx context.Context) error {
	c, err := s.OpenCatalog(ctx)
	if err != nil {
		return err
	}
	_, err = c.ListJobs(ctx, catalogOne)
	c.Close()
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	st, err := s.ReadConfig(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range s.RepositoryNames(st.Engine) {
		loc, err := s.namedLocation(st.Engine, name)
		if err == nil {
			err = s.storeHoldsRepository(ctx, name, loc.Location)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("repository %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// storeHoldsRepository reads the plaintext config of a repository (and
// learns its ID).
func (s *Service) storeHoldsRepository(ctx context.Context, name, location string) error {
	st, err := s.OpenStore(ctx, location)
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := repo.ReadConfig(ctx, st)
	if err != nil {
		return err
	}
	s.repoIDs.learn(c.ID, name)
	return nil
}

// PointVM names the connection and VM of a backup point of the default
// repository: the server checks rights on a point through its VM too
// (a tenant restores its VMs' points from a shared repository).
func (s *Service) PointVM(ctx context.Context, ref string) (conn, vm string, err error) {
	r, release, err := s.Open(ctx, DefaultRepo(), NoLease)
	if err != nil {
		return "", "", err
	}
	defer release()
	snap, err := r.FindPoint(ctx, ref)
	if err != nil {
		return "", "", err
	}
	return snap.Source.Connection, snap.Source.VMName, nil
}
