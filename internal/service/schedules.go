package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/health"
	"github.com/coffer-backup/coffer/internal/leader"
	"github.com/coffer-backup/coffer/internal/maintenance"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/task"
)

// RunSchedules is the loop of `coffer server`: it runs every policy that
// has a schedule and every maintenance job until ctx ends, beside each
// other (maintenance never blocks backups). Several servers may share a
// catalog: the one holding the catalog's schedules lease runs them, and
// each run is claimed once in the catalog, so no run happens twice; when
// that server stops, another takes over at once, and when it dies, within
// maintenance.takeover-after. Every server keeps its health monitor
// (metrics); the one running the schedules also sends its notifications.
// Leftovers of a coffer that died mid-backup are cleaned up at start. A
// run whose predecessor still goes is skipped (a policy's skip is
// recorded as a job).
func (s *Service) RunSchedules(ctx context.Context) error {
	cfg, warnings, err := s.policyConfig()
	if err != nil {
		return err
	}
	mcfg := s.cfg.Maintenance.WithDefaults()
	jobs, err := mcfg.Jobs(cfg)
	if err != nil {
		return invalidf("%s: %v", s.cfg.EngineSource, err)
	}
	var scheduled []policy.Policy
	var names []string
	for _, p := range cfg.Policies {
		if p.Schedule != "" {
			scheduled = append(scheduled, p)
			names = append(names, p.ConnectionNames()...)
			for _, f := range warnings[p.Name] {
				s.log.Warn(f.Message)
			}
		}
	}
	if len(scheduled) == 0 && len(jobs) == 0 {
		return invalidf("no policy and no maintenance job has a schedule: nothing for the server to run")
	}
	if err := s.Start(ctx, StartOptions{Prune: true, Deliver: true}); err != nil {
		return err
	}
	ctl, err := s.control(ctx)
	if err != nil {
		return err
	}
	cat, err := s.openCatalog(ctx)
	if err != nil {
		return err
	}
	defer cat.Close()
	conns, err := s.openConnectors(ctx, cfg, names)
	if err != nil {
		return err
	}
	_, t := LocalTasks{Logger: s.log}.Start(ctx, "server", "schedules")
	eng, err := s.newEngine(ctx, t, cfg, cat, conns)
	if err != nil {
		return err
	}
	defer eng.Close()
	if m := s.cfg.Metrics; m != nil {
		m.SetSlots(eng.Slots)
		defer m.SetSlots(nil)
	}
	var leading atomic.Bool
	monitor, err := s.HealthMonitor(ctx, leading.Load, nil)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = monitor.Run(ctx)
	}()
	defer wg.Wait()

	holder := leader.Holder()
	claim := func(ctx context.Context, schedule string, slot time.Time) (bool, error) {
		return leader.Claim(ctx, ctl.cat, holder, schedule, slot, time.Now())
	}
	elector := &leader.Elector{Leases: ctl.cat, Holder: holder, TTL: time.Duration(mcfg.TakeoverAfter), Logger: s.log,
		Changed: func(held bool) {
			leading.Store(held)
			if s.cfg.Metrics != nil {
				s.cfg.Metrics.SetLeader(held)
			}
		}}
	s.log.Info("coffer server started", "policies", len(scheduled), "maintenance jobs", len(jobs), "holder", holder)
	err = elector.Run(ctx, func(ctx context.Context) {
		s.runScheduled(ctx, eng, scheduled, jobs, claim)
	})
	if errors.Is(err, context.Canceled) {
		s.log.Info("coffer server stopped")
		return nil
	}
	return err
}

// runScheduled runs the policies' and the maintenance jobs' schedules
// side by side until ctx ends (this server stops, or another took the
// schedules over).
func (s *Service) runScheduled(ctx context.Context, eng *engine.Engine, policies []policy.Policy, jobs []maintenance.Job,
	claim func(context.Context, string, time.Time) (bool, error)) {
	// The schedules start their tasks as nobody's but the schedules' own:
	// no user name can be spelled so (auth's names have no @).
	ctx = task.WithUser(ctx, task.User{Name: ScheduleUser})
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(2)
	go func() {
		defer wg.Done()
		sched := &engine.Scheduler{Engine: eng, Policies: policies, Claim: claim, Started: func(j *engine.Job) {
			s.log.Info("job started", "job", j.ID(), "policy", j.Policy().Name)
			go func() {
				res, err := j.Wait()
				switch {
				case err != nil:
					s.log.Error("job failed", "job", j.ID(), "policy", j.Policy().Name, "err", err)
				default:
					s.log.Info("job finished", "job", j.ID(), "policy", j.Policy().Name, "status", res.Job.Status,
						"tasks", len(res.Tasks), "failed", len(res.Failed()))
				}
			}()
		}}
		_ = sched.Run(ctx)
	}()
	go func() {
		defer wg.Done()
		ms := &maintenance.Scheduler{Jobs: jobs, Runner: s.RunMaintenance, Claim: claim, Logger: s.log}
		_ = ms.Run(ctx)
	}()
}

// RunMaintenance runs one scheduled maintenance job; each operation it
// runs is a task with the slot in its log.
func (s *Service) RunMaintenance(ctx context.Context, j maintenance.Job, r maintenance.Run) error {
	ctx = withSchedule(ctx, scheduleNote{name: j.Name, slot: r.Slot, window: r.WindowEnd})
	var err error
	switch j.Kind {
	case "gc":
		_, err = s.GC(ctx, GCInput{Repository: j.Repository})
	case "verify":
		_, err = s.Verify(ctx, VerifyInput{Repository: j.Repository, ReadData: r.Shares > 0, SubsetNum: r.Share, SubsetDen: r.Shares})
	case "forget":
		if !j.Keep.Empty() {
			_, err = s.Forget(ctx, ForgetInput{Repository: j.Repository, Keep: j.Keep})
			break
		}
		var errs []error
		for _, name := range j.Policies {
			p, _ := s.cfg.Engine.Policy(name)
			_, e := s.Forget(ctx, ForgetInput{Repository: j.Repository, Keep: p.Retention, Tags: map[string]string{"policy": name}})
			errs = append(errs, e)
		}
		err = errors.Join(errs...)
	case "copy":
		in := CopyInput{FromRepository: j.Repository, ToRepository: j.To}
		if j.ImmutableFor > 0 {
			in.LockedUntil = policy.LockEnd(time.Now(), j.ImmutableFor)
		}
		_, err = s.Copy(ctx, in)
	default:
		err = fmt.Errorf("unknown maintenance job kind %q", j.Kind)
	}
	return err
}

// ScheduleUser is the user of the tasks the server's schedules start.
const ScheduleUser = "@schedule"

// scheduleNote is what a scheduled run's tasks write first in their logs.
type scheduleNote struct {
	name         string
	slot, window time.Time
}

type scheduleKey struct{}

func withSchedule(ctx context.Context, n scheduleNote) context.Context {
	return context.WithValue(ctx, scheduleKey{}, n)
}

// noteSchedule logs, for a task started by a schedule, which run it is.
func noteSchedule(ctx context.Context, t Task) {
	n, ok := ctx.Value(scheduleKey{}).(scheduleNote)
	if !ok {
		return
	}
	args := []any{"schedule", n.name, "slot", n.slot.UTC().Format(time.RFC3339)}
	if !n.window.IsZero() {
		args = append(args, "window_ends", n.window.UTC().Format(time.RFC3339))
	}
	t.Log(slog.LevelInfo, "scheduled run of "+n.slot.UTC().Format(time.RFC3339), args...)
}

// watchedRepositories are the repositories the health monitor watches:
// the default one when it is configured, and every repositories entry.
func (s *Service) watchedRepositories(cfg *policy.Config) []string {
	var out []string
	if s.cfg.Repository.Location != "" {
		out = append(out, DefaultRepositoryName)
	}
	for _, r := range cfg.Repositories {
		if r.Location != s.cfg.Repository.Location {
			out = append(out, r.Name)
		}
	}
	return out
}

// locationOfNamed is where a repository named as maintenance names it is.
func (s *Service) locationOfNamed(name string) string {
	if name == DefaultRepositoryName {
		return s.cfg.Repository.Location
	}
	return s.locationOf(name)
}

func capacities(c maintenance.Config) map[string]int64 {
	out := map[string]int64{}
	for name, size := range c.Capacity {
		out[name] = int64(size)
	}
	return out
}

// HealthMonitor builds the monitor the server runs (internal/health): the
// catalog's state and the repositories' statistics into Config.Metrics,
// and the rpo-missed, repository-full and lock-lapsing notifications when
// notifying says so (nil: always). now is its clock (nil: time.Now).
func (s *Service) HealthMonitor(ctx context.Context, notifying func() bool, now func() time.Time) (*health.Monitor, error) {
	cfg, err := s.engineConfig()
	if err != nil {
		return nil, err
	}
	ctl, err := s.control(ctx)
	if err != nil {
		return nil, err
	}
	mcfg := s.cfg.Maintenance.WithDefaults()
	return health.New(health.Options{Catalog: ctl.cat, Config: cfg, Repositories: s.watchedRepositories(cfg),
		Open: s.openNamedRepo, Location: s.locationOfNamed, Capacity: capacities(mcfg), FullPercent: mcfg.RepositoryFull,
		LockWarning: time.Duration(mcfg.LockWarning), CheckEvery: time.Duration(mcfg.HealthEvery),
		StatsEvery: time.Duration(mcfg.StatsEvery), Metrics: s.cfg.Metrics, Emitter: s.emitter(ctx),
		Notifying: notifying, Logger: s.log, Now: now}), nil
}
