package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/service"
)

// unitRepos are the repositories a worker's VM units write, each opened
// once and kept open while the worker works: an open costs the
// password's key derivation and the index's load, far more than the unit
// of a small VM, and the engine in a server's process opens a
// repository once per run, not per VM. Each unit's write session takes
// its lease, then refreshes the index (repo's rule for what a session
// may deduplicate against), so a repository kept open stays as safe as a
// fresh one.
type unitRepos struct {
	svc *service.Service
	log *slog.Logger

	mu   sync.Mutex
	open map[string]*unitRepo
}

// unitRepo is one open repository and the manifests read from it so far.
// A manifest never changes once written, so each unit reads only the new
// ones: the history an incremental picks its parent from costs one
// listing, not one read per point of the repository.
type unitRepo struct {
	r *repo.Repository

	mu     sync.Mutex
	points map[id.ID]*repo.Point
}

func newUnitRepos(svc *service.Service, log *slog.Logger) *unitRepos {
	return &unitRepos{svc: svc, log: log, open: map[string]*unitRepo{}}
}

// get is the repository name ("": the default), opened at its first use.
func (u *unitRepos) get(ctx context.Context, name string) (*unitRepo, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if ur := u.open[name]; ur != nil {
		return ur, nil
	}
	r, err := u.svc.OpenNamed(ctx, name)
	if err != nil {
		return nil, err
	}
	ur := &unitRepo{r: r, points: map[id.ID]*repo.Point{}}
	u.open[name] = ur
	return ur, nil
}

// close closes every repository opened.
func (u *unitRepos) close() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	var errs []error
	for name, ur := range u.open {
		if err := ur.r.Close(); err != nil {
			errs = append(errs, fmt.Errorf("repository %q: %w", name, err))
		}
		delete(u.open, name)
	}
	return errors.Join(errs...)
}

// history is the repository's points now: the manifests listed, those not
// read before read, those gone (forgotten) dropped. A damaged manifest is
// left out, as repo.Repository.Points leaves it.
func (ur *unitRepo) history(ctx context.Context) ([]*repo.Point, error) {
	ids, err := ur.r.ListPointIDs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list backup points: %w", err)
	}
	ur.mu.Lock()
	defer ur.mu.Unlock()
	listed := make(map[id.ID]bool, len(ids))
	out := make([]*repo.Point, 0, len(ids))
	for _, x := range ids {
		listed[x] = true
		p := ur.points[x]
		if p == nil {
			if p, err = ur.r.LoadPoint(ctx, x); err != nil {
				if errors.Is(err, repo.ErrSnapshotNotFound) || errors.Is(err, repo.ErrCorruptManifest) || errors.Is(err, repo.ErrUnsupportedVersion) {
					continue
				}
				return nil, err
			}
			ur.points[x] = p
		}
		out = append(out, p)
	}
	for x := range ur.points {
		if !listed[x] {
			delete(ur.points, x)
		}
	}
	return out, nil
}
