package fleetops

import (
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/apidoc"

	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coffer-backup/coffer/internal/api"

	"github.com/coffer-backup/coffer/internal/configobj"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/fleet"
	"github.com/coffer-backup/coffer/internal/health"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/leader"
	"github.com/coffer-backup/coffer/internal/maintenance"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/schedule"
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
// in effect kept. The maintenance jobs (the file's section with the
// catalog's schedules and windows) are resolved again at each change, and
// the scheduler follows them. Without any scheduled policy the server
// waits for one. Leftovers of a coffer that died mid-backup are cleaned up at
// start. A run whose predecessor still goes is skipped (a policy's skip
// is recorded as a job).
func (s Ops) RunSchedules(ctx context.Context) error {
	states, err := s.WatchConfig(ctx)
	if err != nil {
		return err
	}
	st := <-states
	cfg, warnings, err := service.CheckState(st, true)
	if err != nil {
		return err
	}
	mcfg := s.Config.Maintenance.WithDefaults()
	jobs, err := st.Maintenance.Jobs(cfg)
	if err != nil {
		return service.Invalidf("%s: %v", service.ConfigWhere(st), err)
	}
	if err := s.Start(ctx, service.StartOptions{Prune: true, Deliver: true}); err != nil {
		return err
	}
	ctl, err := s.Control(ctx)
	if err != nil {
		return err
	}
	cat, err := s.OpenCatalog(ctx)
	if err != nil {
		return err
	}
	defer cat.Close()
	units, err := s.startFleet(ctx, cat)
	if err != nil {
		return err
	}
	defer units.stop(s.Logger().Warn) // after the engine's Close: no unit is handed off any more
	opened := service.NewConnectorSet(s.Service)
	// Deferred before the engine's Close: runs after it, once no job
	// uses a connector.
	defer opened.Close()
	conns, err := opened.Update(ctx, cfg)
	if err != nil {
		return err
	}
	_, t := service.LogDisplay{Logger: s.Logger()}.Start(ctx, "server", "schedules")
	plan := &schedulePlan{changed: make(chan struct{})}
	plan.set(s.scheduled(cfg, warnings, len(jobs)), jobs)
	marks := markCopiesAfter(plan)
	eng, err := s.NewEngine(ctx, t, cfg, cat, conns, units.engineOptions, marks)
	if err != nil {
		return err
	}
	defer func() {
		if err := eng.Close(); err != nil {
			s.Logger().Warn("closing the schedules' engine", "err", err)
		}
	}()
	defer s.Serve(eng, marks)()
	if m := s.Config.Metrics; m != nil {
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

	holder := leader.Holder()
	claim := func(ctx context.Context, schedule string, slot time.Time) (bool, error) {
		return leader.Claim(ctx, ctl.Catalog, holder, schedule, slot, time.Now())
	}
	elector := &leader.Elector{Leases: ctl.Catalog, Holder: holder, TTL: time.Duration(mcfg.TakeoverAfter), Logger: s.Logger(),
		Changed: func(held bool) {
			leading.Store(held)
			if s.Config.Metrics != nil {
				s.Config.Metrics.SetLeader(held)
			}
		}}
	s.Logger().Info("coffer server started", "policies", len(plan.policies), "maintenance jobs", len(jobs), "holder", holder,
		"generation", st.Generation)
	// A newer coffer migrating the shared catalog ends this server's
	// campaign (the lease is released at once) but not the server.
	electCtx, superseded := context.WithCancel(ctx)
	defer superseded()
	stopWatch := s.watchSchema(ctx, time.Duration(mcfg.TakeoverAfter)/3, superseded)
	defer stopWatch()
	done := make(chan error, 1)
	serving := ctx
	go func() {
		done <- elector.Run(electCtx, func(ctx context.Context) {
			grants, endLead := units.lead(ctx, eng, holder, s.Logger())
			defer func() {
				endLead()
				if serving.Err() == nil { // the lease lost, not the server stopping
					units.handOver(eng, s.Logger())
				}
			}()
			s.recoverInterrupted(ctx)
			observed, onLost := units.follow(ctx, eng, grants, s.Logger())
			looked := make(chan struct{}) // the engine was given the workers once
			var once sync.Once
			stopWatch := s.watchWorkers(ctx, cat, time.Duration(mcfg.WorkerDeadAfter), func(ws []fleet.Worker) {
				if observed != nil {
					observed(ws)
				}
				once.Do(func() { close(looked) })
			}, onLost)
			defer stopWatch()
			resumed := newResumedRuns()
			if units.srv != nil {
				defer s.resumeRuns(ctx, eng, cat, looked, time.Duration(mcfg.TakeoverAfter), resumed)()
			} else {
				resumed.lookedOnce() // no fleet: no run is resumed
			}
			s.runScheduled(ctx, eng, plan, schedulesClaims{claim: claim, lastRun: ctl.Catalog.LastRun, resumed: resumed,
				waitResumed: time.Duration(mcfg.TakeoverAfter)}, time.Duration(mcfg.InventoryEvery))
		})
	}()
	for {
		select {
		case err := <-done:
			if errors.Is(err, context.Canceled) && ctx.Err() == nil {
				done = nil // superseded: serve on without the schedules
				continue
			}
			if errors.Is(err, context.Canceled) {
				s.Logger().Info("coffer server stopped")
				return nil
			}
			return err
		case <-ctxDoneOnceIdle(ctx, done, states):
			s.Logger().Info("coffer server stopped")
			return nil
		case st, open := <-states:
			if !open {
				states = nil // ctx ended: wait for the schedules to stop
				continue
			}
			s.reload(ctx, st, ctl, reloadable{eng: eng, conns: opened, monitor: monitor, plan: plan})
		}
	}
}

// reloadable is what the server changes when the configuration in
// effect changes.
type reloadable struct {
	eng     *engine.Engine
	conns   *service.ConnectorSet
	monitor *health.Monitor
	plan    *schedulePlan
}

// reload makes the server run the configuration in effect st: the
// notifier takes its targets and matchers (keeping the old ones if it
// cannot), and, unless the engine sections are refused, the engine, the
// health monitor and the policies' schedules theirs.
func (s Ops) reload(ctx context.Context, st *configobj.State, ctl *service.Control, r reloadable) {
	if ctl.Notifier != nil {
		if err := ctl.Notifier.Reload(st.Notify); err != nil {
			s.Logger().Error("the notification targets changed, but they cannot be used: keeping the ones in effect",
				"generation", st.Generation, "err", err)
		}
	}
	cfg, warnings, err := service.CheckState(st, true)
	var conns *service.Connectors
	if err == nil {
		conns, err = r.conns.Update(ctx, cfg)
	}
	if err != nil {
		s.Logger().Error("the configuration changed, but the server cannot run it: keeping the configuration in effect",
			"generation", st.Generation, "err", err)
		return
	}
	r.eng.Reload(engine.Reload{Config: cfg, Connectors: conns.Conns, StorageSnapshotters: conns.Storage})
	r.monitor.Reload(cfg, s.watchedRepositories(cfg))
	// The API refuses changes that break the maintenance section; another
	// server's, with a section of its own, may not have known it.
	before, _ := r.plan.get()
	jobs, err := st.Maintenance.Jobs(cfg)
	if err != nil {
		s.Logger().Error("the maintenance section no longer fits the configuration in effect: its jobs run as resolved before "+
			"(those naming what is gone fail); correct the configuration file or the objects", "err", err)
		jobs = before.jobs
	}
	policies := s.scheduled(cfg, warnings, len(jobs))
	r.plan.set(policies, jobs)
	s.Logger().Info("configuration reloaded", "generation", st.Generation, "policies", len(policies), "maintenance jobs", len(jobs))
}

// schedulePlan holds the scheduled policies and the maintenance jobs of
// the configuration in effect. The schedules of the lease holder follow
// it (runScheduled); a server that takes the lease over starts from the
// newest.
type schedulePlan struct {
	mu       sync.Mutex
	policies []policy.Policy
	jobs     []maintenance.Job
	changed  chan struct{} // closed (and replaced) by set
}

func (p *schedulePlan) set(ps []policy.Policy, jobs []maintenance.Job) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.policies, p.jobs = ps, jobs
	close(p.changed)
	p.changed = make(chan struct{})
}

// planned is what a schedulePlan holds at one time.
type planned struct {
	policies []policy.Policy
	jobs     []maintenance.Job
}

// get returns the plan and a channel closed when it changes.
func (p *schedulePlan) get() (planned, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return planned{p.policies, p.jobs}, p.changed
}

// afterJobs are the maintenance jobs that follow runs of a policy, as
// the configuration in effect now has them.
func (p *schedulePlan) afterJobs(policyName string) []maintenance.Job {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maintenance.After(p.jobs, policyName)
}

// scheduled lists the policies that have a schedule, logging what each
// will do differently from how it reads. Without any the server waits
// for one (from the API, or a restart with another file), running its
// maintenance jobs meanwhile.
func (s Ops) scheduled(cfg *policy.Config, warnings map[string][]api.Finding, maintenanceJobs int) []policy.Policy {
	var out []policy.Policy
	for _, p := range cfg.Policies {
		if p.Schedule != "" {
			out = append(out, p)
			for _, f := range warnings[p.Name] {
				s.Logger().Warn(f.Message)
			}
		}
	}
	if len(out) == 0 {
		s.Logger().Warn("no policy has a schedule: the server waits for one (add a schedule in the configuration file, or through the API)",
			"maintenance jobs", maintenanceJobs)
	}
	return out
}

// runScheduled runs the policies' and the maintenance jobs' schedules
// side by side until ctx ends (this server stops, or another took the
// schedules over). The policies' schedules follow plan. The inventory's
// refresher runs beside them, so that one server of several lists the
// hypervisors.
func (s Ops) runScheduled(ctx context.Context, eng *engine.Engine, plan *schedulePlan, claims schedulesClaims, inventoryEvery time.Duration) {
	// The schedules start their tasks as nobody's but the schedules' own:
	// no user name can be spelled so (auth's names have no @).
	ctx = job.WithUser(ctx, job.User{Name: service.ScheduleUser})
	now, changed := plan.get()
	updates := make(chan []policy.Policy)
	jobUpdates := make(chan []maintenance.Job)
	clock := schedule.ServerClock
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(5)
	go func() {
		defer wg.Done()
		s.runCopiesAfter(ctx, plan)
	}()
	go func() {
		defer wg.Done()
		s.refreshInventories(ctx, inventoryEvery)
	}()
	go func() {
		defer wg.Done()
		// A dead leader's scheduled run is resumed first (when the catalog
		// answers in time), so that its policy's slots skip while it goes.
		claims.resumed.wait(ctx, claims.waitResumed, s.Logger().Warn)
		sched := &engine.Scheduler{Engine: eng, Policies: now.policies, Updates: updates, Claim: claims.claim, Started: s.logJob,
			LastRun: claims.lastRun, Running: claims.resumed.get, Now: clock.Now, After: clock.After}
		if err := sched.Run(ctx); err != nil && ctx.Err() == nil {
			s.Logger().Error("the policies' schedules stopped", "err", err)
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
			var next planned
			next, changed = plan.get()
			for _, send := range []func() bool{
				func() bool { return sendOrDone(ctx, updates, next.policies) },
				func() bool { return sendOrDone(ctx, jobUpdates, next.jobs) },
			} {
				if !send() {
					return
				}
			}
		}
	}()
	go func() {
		defer wg.Done()
		ms := &maintenance.Scheduler{Jobs: now.jobs, Updates: jobUpdates, Runner: s.RunMaintenance, Claim: claims.claim, LastRun: claims.lastRun,
			Logger: s.Logger(), Now: clock.Now, After: clock.After}
		_ = ms.Run(ctx)
	}()
}

// sendOrDone sends v on ch unless ctx ends first (false).
func sendOrDone[T any](ctx context.Context, ch chan<- T, v T) bool {
	select {
	case <-ctx.Done():
		return false
	case ch <- v:
		return true
	}
}

// schedulesClaims are the catalog's records of scheduled runs: each run
// claimed once, and each schedule's newest claimed run; and the runs of
// a dead leader that this one resumed, which the policies' schedules wait
// for at most waitResumed.
type schedulesClaims struct {
	claim       func(ctx context.Context, schedule string, slot time.Time) (bool, error)
	lastRun     func(ctx context.Context, schedule string) (time.Time, bool, error)
	resumed     *resumedRuns
	waitResumed time.Duration
}

// logJob logs a scheduled job's start and end.
func (s Ops) logJob(j *engine.Job) {
	s.Logger().Info("job started", "job", j.ID(), "policy", j.Policy().Name)
	go func() {
		res, err := j.Wait()
		switch {
		case err != nil:
			s.Logger().Error("job failed", "job", j.ID(), "policy", j.Policy().Name, "err", err)
		default:
			s.Logger().Info("job finished", "job", j.ID(), "policy", j.Policy().Name, "status", res.Job.Status,
				"tasks", len(res.Tasks), "failed", len(res.Failed()))
		}
	}()
}

// RunMaintenance runs one scheduled maintenance job; each operation it
// runs is a task with the slot in its log.
func (s Ops) RunMaintenance(ctx context.Context, j maintenance.Job, r maintenance.Run) error {
	ctx = service.WithSchedule(ctx, service.ScheduleNote{Name: j.Name, Slot: r.Slot, Window: r.WindowEnd, Missed: r.Missed})
	var err error
	switch j.Kind {
	case "gc":
		_, err = s.Invoke(ctx, "gc", &api.GCInput{RepoParam: api.RepoParam{Repo: j.Repository}})
	case "verify":
		_, err = s.Invoke(ctx, "verify", &api.VerifyInput{RepoParam: api.RepoParam{Repo: j.Repository}, Body: api.VerifyRequest{ReadData: r.Shares > 0, SubsetNum: r.Share, SubsetDen: r.Shares}})
	case "forget":
		if !j.Keep.Empty() {
			_, err = s.Invoke(ctx, "forget", &api.ForgetInput{RepoParam: api.RepoParam{Repo: j.Repository}, Body: api.ForgetRequest{Keep: apidoc.KeepRules(j.Keep)}})
			break
		}
		// Each policy's retention as the configuration in effect has it
		// now (the API may have changed it since the job was resolved).
		st, e := s.ConfigInEffect(ctx)
		if e != nil {
			return e
		}
		var errs []error
		for _, name := range j.Policies {
			p, ok := st.Engine.Policy(name)
			if !ok {
				errs = append(errs, service.Invalidf("maintenance %s: policy %s is no longer in the configuration: its points are left alone", j.Name, name))
				continue
			}
			_, e := s.Invoke(ctx, "forget", &api.ForgetInput{RepoParam: api.RepoParam{Repo: j.Repository},
				Body: api.ForgetRequest{Keep: apidoc.KeepRules(p.Retention), Tags: map[string]string{"policy": name}}})
			errs = append(errs, e)
		}
		err = errors.Join(errs...)
	case "copy":
		var sel api.CopyRequest
		if j.ImmutableFor > 0 {
			sel.LockedUntil = policy.LockEnd(time.Now(), j.ImmutableFor)
		}
		err = s.copyTo(ctx, j, sel)
	case "media-copy":
		err = s.mediaCopyScheduled(ctx, j, r.Slot)
	case "verify-boot":
		err = s.verifyPolicyBoots(ctx, j, r.Slot)
	case "replicate":
		_, err = s.Invoke(ctx, "run-replication", &api.RunReplicationInput{Name: j.Replication})
	case "catalog-export":
		_, err = s.Invoke(ctx, "export-catalog", &api.ExportCatalogInput{RepoParam: api.RepoParam{Repo: j.Repository},
			Body: api.ExportCatalogRequest{History: j.History, Keep: j.KeepExports, Reason: "schedule"}})
	default:
		err = fmt.Errorf("unknown maintenance job kind %q", j.Kind)
	}
	return err
}

// copyTo runs a maintenance copy job: the copy operation on the job's
// repository, as a request to it would.
func (s Ops) copyTo(ctx context.Context, j maintenance.Job, sel api.CopyRequest) error {
	from, err := s.ForRepository(ctx, j.Repository)
	if err != nil {
		return err
	}
	_, err = from.Invoke(ctx, "copy", &api.CopyInput{RepoParam: api.RepoParam{Repo: j.Repository}, To: j.To, Body: sel})
	return err
}
