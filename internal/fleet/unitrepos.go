package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/policy"
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
	// configs are the configurations in effect read for the jobs seen
	// last, by job ID (configFor).
	configs map[int64]*policy.Config
}

// unitRepo is one open repository and the manifests read from it so far.
// A manifest never changes once written, so each unit reads only the new
// ones: the history an incremental picks its parent from costs one
// listing, not one read per point of the repository.
type unitRepo struct {
	r       *repo.Repository
	writers *unitWriters

	mu     sync.Mutex
	points map[id.ID]*repo.Point
	// jobs are the histories listed for the jobs seen last, by job ID: a
	// job's units share the first one's, as the engine in a server's
	// process reads a job's history once, at its start. Listing the
	// repository's points per unit cost a worker more than the unit of a
	// small VM, growing with the repository.
	jobs map[int64][]*repo.Point
}

// jobsKept bounds unitRepo.jobs: the policies' runs a worker serves at
// once; the oldest job's history goes first (a job seen again lists anew).
const jobsKept = 16

func newUnitRepos(svc *service.Service, log *slog.Logger) *unitRepos {
	return &unitRepos{svc: svc, log: log, open: map[string]*unitRepo{}, configs: map[int64]*policy.Config{}}
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
	ur := &unitRepo{r: r, writers: newUnitWriters(), points: map[id.ID]*repo.Point{}, jobs: map[int64][]*repo.Point{}}
	u.open[name] = ur
	return ur, nil
}

// configFor is the configuration in effect for job's units: as this
// worker read it for the job's first unit (job 0: now, every time), as
// the engine in a server's process reads it once at a job's start. Read
// and checked per unit, it cost a statement and a validation of every
// connection's options per VM.
func (u *unitRepos) configFor(ctx context.Context, job int64) (*policy.Config, error) {
	u.mu.Lock()
	cfg := u.configs[job]
	u.mu.Unlock()
	if cfg != nil && job != 0 {
		return cfg, nil
	}
	cfg, _, err := u.svc.PolicyConfig(ctx)
	if err != nil || job == 0 {
		return cfg, err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.configs) >= jobsKept {
		delete(u.configs, slices.Min(slices.Collect(maps.Keys(u.configs)))) // job IDs grow
	}
	u.configs[job] = cfg
	return cfg, nil
}

// close closes every repository opened.
func (u *unitRepos) close() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	var errs []error
	for name, ur := range u.open {
		if err := errors.Join(ur.writers.close(context.Background()), ur.r.Close()); err != nil {
			errs = append(errs, fmt.Errorf("repository %q: %w", name, err))
		}
		delete(u.open, name)
	}
	return errors.Join(errs...)
}

// historyFor is the history of job's units: the repository's points when
// the job's first unit on this worker asked (job 0: now, every time).
// Within a job each VM is backed up once, so the points its other units
// commit meanwhile are never a unit's parent; a retry's failed attempt
// committed none (a fenced one's is never current, as in the engine).
func (ur *unitRepo) historyFor(ctx context.Context, job int64) ([]*repo.Point, error) {
	ur.mu.Lock()
	h, ok := ur.jobs[job]
	ur.mu.Unlock()
	if ok && job != 0 {
		return h, nil
	}
	h, err := ur.history(ctx)
	if err != nil || job == 0 {
		return h, err
	}
	ur.mu.Lock()
	defer ur.mu.Unlock()
	if kept, ok := ur.jobs[job]; ok { // another unit of the job listed meanwhile
		return kept, nil
	}
	if len(ur.jobs) >= jobsKept {
		delete(ur.jobs, slices.Min(slices.Collect(maps.Keys(ur.jobs)))) // job IDs grow
	}
	ur.jobs[job] = h
	return h, nil
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
