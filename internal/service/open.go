package service

import (
	"context"

	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
)

// Every operation opens a repository here, in one of two ways: WithRepo
// for the length of a call, open when the repository outlives it (a VM or
// an NBD export served from a point). Both take the lease the operation's
// access needs and end it before closing the repository.

// repoRef names the repository an operation opens.
type repoRef struct {
	name     string         // a repositories entry ("": the default repository)
	cfg      *policy.Config // the configuration naming it (nil: the one in effect)
	location string         // a location instead of a name
	other    bool           // location opens with the other password
}

// DefaultRepo is the service's default repository.
func DefaultRepo() repoRef { return repoRef{} }

// NamedRepo is a repository by the name maintenance and task objects
// use: "" and "default" are the default repository, any other a
// repositories entry of the configuration in effect.
func NamedRepo(name string) repoRef {
	if name == DefaultRepository {
		name = ""
	}
	return repoRef{name: name}
}

// NamedRepoIn is a repositories entry of cfg ("": the default repository).
func NamedRepoIn(cfg *policy.Config, name string) repoRef { return repoRef{name: name, cfg: cfg} }

// RepoAt is the repository at location, opened with the default
// repository's password ("": the default repository).
func RepoAt(location string) repoRef { return repoRef{location: location} }

// OtherRepoAt is a second repository (copy target, key source), opened
// with the other password.
func OtherRepoAt(location string) repoRef { return repoRef{location: location, other: true} }

// repoUse is what an operation does with a repository, and so the lease it
// holds while the repository is open.
type repoUse struct {
	lease   string // "": none
	purpose string
}

// NoLease is for reads, and for writes whose own code takes the lease
// they need (the writer a backup lease, gc and forget a maintenance lease,
// transfer a copy lease).
var NoLease = repoUse{}

// VerifyLease is for verify: gc waits for it to end.
var VerifyLease = repoUse{lease: "verify", purpose: "verify"}

// RestoreLease is for reading backup points (restores, files, instant
// recovery, boot verification): garbage collection keeps the points' data
// while they are read, even when a point is forgotten meanwhile.
func RestoreLease(purpose string) repoUse { return repoUse{lease: "restore", purpose: purpose} }

// WithRepo opens the repository which names, with use's lease, runs fn, and
// ends the lease and closes the repository when fn returns.
func WithRepo[T any](ctx context.Context, s *Service, which repoRef, use repoUse, fn func(*repo.Repository) (T, error)) (T, error) {
	r, release, err := s.Open(ctx, which, use)
	if err != nil {
		var zero T
		return zero, err
	}
	defer release()
	return fn(r)
}

// Open opens the repository which names and takes use's lease. release ends
// the lease, also after ctx was cancelled, and closes the repository.
func (s *Service) Open(ctx context.Context, which repoRef, use repoUse) (r *repo.Repository, release func(), err error) {
	if r, err = s.openRef(ctx, which); err != nil {
		return nil, nil, err
	}
	if use.lease == "" {
		return r, func() { _ = r.Close() }, nil
	}
	lease, err := r.AcquireLease(ctx, use.lease, "", use.purpose, false)
	if err != nil {
		_ = r.Close()
		return nil, nil, err
	}
	return r, func() {
		lease.Release(context.WithoutCancel(ctx))
		_ = r.Close()
	}, nil
}

func (s *Service) openRef(ctx context.Context, which repoRef) (*repo.Repository, error) {
	switch {
	case which.location != "" || which.other:
		src := s.Config.Repository.Password
		if which.other {
			src = s.Config.OtherPassword
		}
		pw, err := Password(src)
		if err != nil {
			return nil, err
		}
		return s.openLocation(ctx, which.location, pw)
	case which.name != "":
		cfg := which.cfg
		if cfg == nil {
			st, err := s.ConfigInEffect(ctx)
			if err != nil {
				return nil, err
			}
			cfg = st.Engine
		}
		if _, ok := cfg.Repository(which.name); !ok {
			return nil, Invalidf("no repository named %q in the configuration", which.name)
		}
		named, err := s.forRepositoryIn(cfg, which.name)
		if err != nil {
			return nil, err
		}
		return named.openRef(ctx, DefaultRepo())
	}
	pw, err := Password(s.Config.Repository.Password)
	if err != nil {
		return nil, err
	}
	r, err := s.openLocation(ctx, s.Config.Repository.Location, pw)
	if err == nil {
		s.repoIDs.learn(r.Config().ID, s.BoundRepo)
	}
	return r, err
}

// OpenNamed opens a repository by name (as NamedRepo) for a component
// that keeps it and closes it itself: the engine, whose writers take
// their own leases, and the health monitor, which only reads.
func (s *Service) OpenNamed(ctx context.Context, name string) (*repo.Repository, error) {
	return s.openRef(ctx, NamedRepo(name))
}

// Password asks a password source (nil: no password).
func Password(src PasswordSource) ([]byte, error) {
	if src == nil {
		return nil, nil
	}
	return src()
}

func (s *Service) openLocation(ctx context.Context, location string, pw []byte) (*repo.Repository, error) {
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

// OpenedPoint is a backup point opened for reading under a restore lease.
type OpenedPoint struct {
	Repo    *repo.Repository
	Point   *repo.Point
	Release func()
}

// OpenPoint opens the default repository for reading backup point ref: it
// takes a restore lease first (garbage collection keeps the point's data
// while it is read, even if the point is forgotten meanwhile), then finds
// the point. release ends the lease, also after
// ctx was cancelled, and closes the repository.
func (s *Service) OpenPoint(ctx context.Context, ref, purpose string) (*OpenedPoint, error) {
	r, release, err := s.Open(ctx, DefaultRepo(), RestoreLease(purpose))
	if err != nil {
		return nil, err
	}
	snap, err := r.FindPoint(ctx, ref)
	if err != nil {
		release()
		return nil, err
	}
	return &OpenedPoint{Repo: r, Point: snap, Release: release}, nil
}
