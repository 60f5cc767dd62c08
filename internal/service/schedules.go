package service

import (
	"context"
	"errors"
	"fmt"
	"github.com/coffer-backup/coffer/internal/api"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coffer-backup/coffer/internal/configobj"
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
//
// It follows the configuration in effect (WatchConfig): when an object
// changes, through this server or another sharing the catalog, the
// engine, the policies' schedules, the health monitor and the notifier
// reload without a restart, and runs in progress go on (see engine.Reload
// and engine.Scheduler.Updates). A configuration refused at start stops
// it; a change that would leave it invalid is logged and the configuration
// in effect kept. The maintenance section is the file's: its jobs are
// resolved at start. Without any scheduled policy the server waits for
// one. Leftovers of a coffer that died mid-backup are cleaned up at
// start. A run whose predecessor still goes is skipped (a policy's skip
// is recorded as a job).
func (s *Service) RunSchedules(ctx context.Context) error {
	states, err := s.WatchConfig(ctx)
	if err != nil {
		return err
	}
	st := <-states
	cfg, warnings, err := checkState(st, true)
	if err != nil {
		return err
	}
	mcfg := s.cfg.Maintenance.WithDefaults()
	jobs, err := mcfg.Jobs(cfg)
	if err != nil {
		return invalidf("%s: %v", configWhere(st), err)
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
	opened := &connectorSet{s: s, open: map[string]openConnector{}}
	// Deferred before the engine's Close: runs after it, once no job
	// uses a connector.
	defer opened.close()
	conns, err := opened.update(ctx, cfg)
	if err != nil {
		return err
	}
	_, t := LocalTasks{Logger: s.log}.Start(ctx, "server", "schedules")
	eng, err := s.newEngine(ctx, t, cfg, cat, conns)
	if err != nil {
		return err
	}
	defer eng.Close()
	s.serving.Store(eng)
	defer s.serving.CompareAndSwap(eng, nil)
	if m := s.cfg.Metrics; m != nil {
		m.SetSlots(eng.Slots)
		defer m.SetSlots(nil)
		m.SetLatency(eng.Latency)
		defer m.SetLatency(nil)
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

	plan := &schedulePlan{changed: make(chan struct{})}
	plan.set(s.scheduled(cfg, warnings, len(jobs)))
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
	s.log.Info("coffer server started", "policies", len(plan.policies), "maintenance jobs", len(jobs), "holder", holder,
		"generation", st.Generation)
	done := make(chan error, 1)
	go func() {
		done <- elector.Run(ctx, func(ctx context.Context) {
			s.runScheduled(ctx, eng, plan, jobs, claim, time.Duration(mcfg.InventoryEvery))
		})
	}()
	for {
		select {
		case err := <-done:
			if errors.Is(err, context.Canceled) {
				s.log.Info("coffer server stopped")
				return nil
			}
			return err
		case st, open := <-states:
			if !open {
				states = nil // ctx ended: wait for the schedules to stop
				continue
			}
			s.reload(ctx, st, ctl, reloadable{eng: eng, conns: opened, monitor: monitor, plan: plan, maintenance: mcfg})
		}
	}
}

// reloadable is what the server changes when the configuration in
// effect changes.
type reloadable struct {
	eng         *engine.Engine
	conns       *connectorSet
	monitor     *health.Monitor
	plan        *schedulePlan
	maintenance maintenance.Config
}

// reload makes the server run the configuration in effect st: the
// notifier takes its targets and matchers (keeping the old ones if it
// cannot), and, unless the engine sections are refused, the engine, the
// health monitor and the policies' schedules theirs.
func (s *Service) reload(ctx context.Context, st *configobj.State, ctl *control, r reloadable) {
	if ctl.notifier != nil {
		if err := ctl.notifier.Reload(st.Notify); err != nil {
			s.log.Error("the notification targets changed, but they cannot be used: keeping the ones in effect",
				"generation", st.Generation, "err", err)
		}
	}
	cfg, warnings, err := checkState(st, true)
	var conns *connectors
	if err == nil {
		conns, err = r.conns.update(ctx, cfg)
	}
	if err != nil {
		s.log.Error("the configuration changed, but the server cannot run it: keeping the configuration in effect",
			"generation", st.Generation, "err", err)
		return
	}
	r.eng.Reload(engine.Reload{Config: cfg, Connectors: conns.conns, StorageSnapshotters: conns.storage})
	r.monitor.Reload(cfg, s.watchedRepositories(cfg))
	// The API refuses changes that break the maintenance section; another
	// server's, with a section of its own, may not have known it.
	jobs, err := r.maintenance.Jobs(cfg)
	if err != nil {
		s.log.Error("the maintenance section no longer fits the configuration in effect: its jobs run as resolved at start "+
			"(those naming what is gone fail); correct the configuration file or the objects", "err", err)
	}
	policies := s.scheduled(cfg, warnings, len(jobs))
	r.plan.set(policies)
	s.log.Info("configuration reloaded", "generation", st.Generation, "policies", len(policies))
}

// schedulePlan holds the scheduled policies of the configuration in
// effect. The schedules of the lease holder follow it (runScheduled); a
// server that takes the lease over starts from the newest.
type schedulePlan struct {
	mu       sync.Mutex
	policies []policy.Policy
	changed  chan struct{} // closed (and replaced) by set
}

func (p *schedulePlan) set(ps []policy.Policy) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.policies = ps
	close(p.changed)
	p.changed = make(chan struct{})
}

// get returns the policies and a channel closed when they change.
func (p *schedulePlan) get() ([]policy.Policy, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.policies, p.changed
}

// scheduled lists the policies that have a schedule, logging what each
// will do differently from how it reads. Without any the server waits
// for one (from the API, or a restart with another file), running its
// maintenance jobs meanwhile.
func (s *Service) scheduled(cfg *policy.Config, warnings map[string][]finding, maintenanceJobs int) []policy.Policy {
	var out []policy.Policy
	for _, p := range cfg.Policies {
		if p.Schedule != "" {
			out = append(out, p)
			for _, f := range warnings[p.Name] {
				s.log.Warn(f.Message)
			}
		}
	}
	if len(out) == 0 {
		s.log.Warn("no policy has a schedule: the server waits for one (add a schedule in the configuration file, or through the API)",
			"maintenance jobs", maintenanceJobs)
	}
	return out
}

// runScheduled runs the policies' and the maintenance jobs' schedules
// side by side until ctx ends (this server stops, or another took the
// schedules over). The policies' schedules follow plan. The inventory's
// refresher runs beside them, so that one server of several lists the
// hypervisors.
func (s *Service) runScheduled(ctx context.Context, eng *engine.Engine, plan *schedulePlan, jobs []maintenance.Job,
	claim func(context.Context, string, time.Time) (bool, error), inventoryEvery time.Duration) {
	// The schedules start their tasks as nobody's but the schedules' own:
	// no user name can be spelled so (auth's names have no @).
	ctx = task.WithUser(ctx, task.User{Name: ScheduleUser})
	policies, changed := plan.get()
	updates := make(chan []policy.Policy)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(4)
	go func() {
		defer wg.Done()
		s.refreshInventories(ctx, inventoryEvery)
	}()
	go func() {
		defer wg.Done()
		sched := &engine.Scheduler{Engine: eng, Policies: policies, Updates: updates, Claim: claim, Started: s.logJob}
		if err := sched.Run(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("the policies' schedules stopped", "err", err)
		}
	}()
	go func() { // the configuration in effect changed: new schedules
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
			var next []policy.Policy
			next, changed = plan.get()
			select {
			case <-ctx.Done():
				return
			case updates <- next:
			}
		}
	}()
	go func() {
		defer wg.Done()
		ms := &maintenance.Scheduler{Jobs: jobs, Runner: s.RunMaintenance, Claim: claim, Logger: s.log}
		_ = ms.Run(ctx)
	}()
}

// logJob logs a scheduled job's start and end.
func (s *Service) logJob(j *engine.Job) {
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
}

// RunMaintenance runs one scheduled maintenance job; each operation it
// runs is a task with the slot in its log.
func (s *Service) RunMaintenance(ctx context.Context, j maintenance.Job, r maintenance.Run) error {
	ctx = withSchedule(ctx, scheduleNote{name: j.Name, slot: r.Slot, window: r.WindowEnd})
	var err error
	switch j.Kind {
	case "gc":
		_, err = s.GC(ctx, &api.GCInput{RepoParam: api.RepoParam{Repo: j.Repository}})
	case "verify":
		_, err = s.Verify(ctx, &api.VerifyInput{RepoParam: api.RepoParam{Repo: j.Repository}, Body: api.VerifyRequest{ReadData: r.Shares > 0, SubsetNum: r.Share, SubsetDen: r.Shares}})
	case "forget":
		if !j.Keep.Empty() {
			_, err = s.Forget(ctx, &api.ForgetInput{RepoParam: api.RepoParam{Repo: j.Repository}, Body: api.ForgetRequest{Keep: keepRules(j.Keep)}})
			break
		}
		// Each policy's retention as the configuration in effect has it
		// now (the API may have changed it since the job was resolved).
		st, e := s.latest(ctx)
		if e != nil {
			return e
		}
		var errs []error
		for _, name := range j.Policies {
			p, ok := st.Engine.Policy(name)
			if !ok {
				errs = append(errs, invalidf("maintenance %s: policy %s is no longer in the configuration: its points are left alone", j.Name, name))
				continue
			}
			_, e := s.Forget(ctx, &api.ForgetInput{RepoParam: api.RepoParam{Repo: j.Repository},
				Body: api.ForgetRequest{Keep: keepRules(p.Retention), Tags: map[string]string{"policy": name}}})
			errs = append(errs, e)
		}
		err = errors.Join(errs...)
	case "copy":
		var sel api.CopyRequest
		if j.ImmutableFor > 0 {
			sel.LockedUntil = policy.LockEnd(time.Now(), j.ImmutableFor)
		}
		_, err = s.CopyWith(ctx, sel, CopyOptions{FromRepository: j.Repository, ToRepository: j.To})
	case "verify-boot":
		err = s.verifyPolicyBoots(ctx, j, r.Slot)
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

// locationOfNamed is where a repository named as maintenance names it
// is, in the configuration this process read last.
func (s *Service) locationOfNamed(name string) string {
	if name == DefaultRepositoryName {
		return s.cfg.Repository.Location
	}
	cfg := s.cfg.Engine
	if st := s.conf.cached(); st != nil {
		cfg = st.Engine
	}
	return s.locationOf(cfg, name)
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
	cfg, err := s.engineConfig(ctx)
	if err != nil {
		return nil, err
	}
	ctl, err := s.control(ctx)
	if err != nil {
		return nil, err
	}
	mcfg := s.cfg.Maintenance.WithDefaults()
	return health.New(health.Options{Catalog: ctl.cat, Config: cfg, Judge: s.judgeForHealth, Repositories: s.watchedRepositories(cfg),
		Open: s.openNamed, Location: s.locationOfNamed, Capacity: capacities(mcfg), FullPercent: mcfg.RepositoryFull,
		LockWarning: time.Duration(mcfg.LockWarning), CheckEvery: time.Duration(mcfg.HealthEvery),
		StatsEvery: time.Duration(mcfg.StatsEvery), Metrics: s.cfg.Metrics, Emitter: s.emitter(ctx),
		Notifying: notifying, Logger: s.log, Now: now}), nil
}
