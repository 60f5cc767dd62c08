package fleetops

import (
	"sync/atomic"

	"github.com/coffer-backup/coffer/internal/fleet"
	"github.com/coffer-backup/coffer/internal/service"

	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/maintenance"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/schedule"
)

// verifyPolicyBoots runs a policy's verify-boot schedule: it picks the
// points of the run (each VM's newest, or each VM's first of the day) and
// boots them, as many at once as limits.boot-verifications allows. Each
// is a task of its own (kind verify-boot, with its VM), so a failure is
// recorded, notified and counted like any other.
func (s Ops) verifyPolicyBoots(ctx context.Context, j maintenance.Job, slot time.Time) error {
	snaps, err := service.WithRepo(ctx, s.Service, service.NamedRepo(j.Repository), service.NoLease, func(r *repo.Repository) ([]*repo.Point, error) {
		return r.Points(ctx, nil)
	})
	if err != nil {
		return err
	}
	if loc, err := schedule.Zone(j.Boot.Timezone); err == nil { // first-of-day: the day of the schedule's zone
		slot = slot.In(loc)
	}
	points := bootChoice(snaps, j.Policy, j.Boot.Points, slot)
	if len(points) == 0 {
		s.Logger().Info("no backup point of the policy to boot in this run", "schedule", j.Name, "points", j.Boot.Points)
		return nil
	}
	workers := 1
	if cfg, err := s.EngineConfig(ctx); err == nil {
		workers = cfg.Limits.WithDefaults().BootVerifications
	}
	onWorkers := s.bootWorkers(ctx, j.Repository)
	var turn atomic.Int64
	in := make(chan *repo.Point)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range min(workers, len(points)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range in {
				var on api.WorkerParam
				if len(onWorkers) > 0 {
					on.Worker = onWorkers[int(turn.Add(1)-1)%len(onWorkers)]
				}
				_, err := s.Invoke(service.WithJobVM(ctx, p.Source.VMName), "verify-boot", &api.VerifyBootInput{
					PointParam:  api.PointParam{RepoParam: api.RepoParam{Repo: j.Repository}, Point: p.ID.String()},
					WorkerParam: on,
					Body: api.VerifyBootRequest{TimeoutSeconds: time.Duration(j.Boot.Timeout).Seconds(), Marker: j.Boot.Marker,
						Probes: j.Boot.Probes}})
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	for _, p := range points {
		select {
		case in <- p:
		case <-ctx.Done():
		}
	}
	close(in)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		s.Logger().Log(ctx, slog.LevelWarn, "scheduled boot verification found points that do not boot", "schedule", j.Name, "err", err)
		return err
	}
	return nil
}

// bootChoice picks from snaps (oldest first) the points of policy name a
// run at slot boots: each source's newest, or each source's first point
// of slot's day (in slot's location: the schedule's time zone).
func bootChoice(snaps []*repo.Point, name, which string, slot time.Time) []*repo.Point {
	chosen := map[string]*repo.Point{}
	var order []string
	y, m, d := slot.Date()
	for _, s := range snaps {
		if s.Tags["policy"] != name {
			continue
		}
		k := s.Source.Key()
		prev, seen := chosen[k]
		switch which {
		case policy.BootFirstOfDay:
			sy, sm, sd := s.Time.In(slot.Location()).Date()
			if sy != y || sm != m || sd != d || seen && !s.Time.Before(prev.Time) {
				continue
			}
		default: // latest
			if seen && s.Time.Before(prev.Time) {
				continue
			}
		}
		if !seen {
			order = append(order, k)
		}
		chosen[k] = s
	}
	out := make([]*repo.Point, 0, len(order))
	for _, k := range order {
		out = append(out, chosen[k])
	}
	return out
}

// bootWorkers are the ready workers that can run QEMU and reach
// repository: when the fleet has any, the scheduled boot verifications
// run on them in turn, off the servers' hosts; otherwise (no fleet, or no
// such worker) on this server, as without a fleet.
func (s Ops) bootWorkers(ctx context.Context, repository string) []string {
	if !fleet.IsPostgres(s.Config.Catalog) {
		return nil
	}
	cat, err := s.OpenCatalog(ctx)
	if err != nil {
		return nil
	}
	defer func() { _ = cat.Close() }()
	ws, err := cat.ListWorkers(ctx)
	if err != nil {
		s.Logger().Warn("the registry cannot be read: boot verifications run on this server", "err", err)
		return nil
	}
	return fleet.BootWorkers(ws, repository)
}
