package fleetops

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/fleet"
	"github.com/coffer-backup/coffer/internal/leader"
	"github.com/coffer-backup/coffer/internal/service"
)

// fleetUnits is the schedules' engine's side of the fleet's workers: on a
// PostgreSQL catalog, a River client on the servers' queue hands the
// engine's units to the workers the registry lists (fleet.UnitRunner).
// The zero value (a SQLite catalog) changes nothing: every unit runs in
// this process, as before.
type fleetUnits struct {
	srv *fleet.Server
	cat fleetCatalog
	svc *service.Service
	// fwd forwards to the leader what this server's API starts while it
	// does not lead (workers_forward.go).
	fwd *fleet.Forwarder
	// unsetRemote ends the service's use of srv for requests that name
	// a worker (service.OnWorker).
	unsetRemote func()
	// leaderEpoch is the schedules lease's epoch while this server holds
	// it (0: it does not): every unit it hands off carries it.
	leaderEpoch atomic.Int64

	mu       sync.Mutex
	followed bool   // the engine was given workers once: it is a fleet's
	names    string // the workers it was given last, for the log
}

// fleetCatalog is what the fleet's side of the server reads: the
// registry, the schedules lease, and the running tasks' progress the
// workers record (fleet.UnitProgress).
type fleetCatalog interface {
	catalog.Workers
	catalog.Leases
	fleet.RunningTasks
}

// startFleet starts the server's side of the hand-off when the catalog is
// PostgreSQL (River's schema migrated, the servers' client started).
func (s Ops) startFleet(ctx context.Context, cat fleetCatalog) (*fleetUnits, error) {
	if !fleet.IsPostgres(s.Config.Catalog) {
		return &fleetUnits{}, nil
	}
	srv, err := fleet.StartServer(ctx, s.Config.Catalog, s.Service, s.Logger())
	if err != nil {
		return nil, err
	}
	if c, ok := cat.(catalog.Catalog); ok {
		if creds, ok := catalog.WorkerCredentialsOf(c); ok {
			if err := creds.ProtectWorkerQueue(ctx); err != nil {
				s.Logger().Warn("the workers' row policies on River's jobs cannot be stated: a worker's token reaches other queues", "err", err)
			}
		}
	}
	// A forwarded operation's wait looks at the lease as often as the
	// leader renews it.
	every := time.Duration(s.Config.Maintenance.WithDefaults().TakeoverAfter) / 3
	fwd := &fleet.Forwarder{Queue: srv.Queue, Leases: cat, Every: every, Log: s.Logger()}
	unset := s.SetRemote(fleet.ForwardingRemote{Remote: fleet.Remote{Queue: srv.Queue, Workers: cat}, Forwarder: fwd})
	return &fleetUnits{srv: srv, cat: cat, svc: s.Service, fwd: fwd, unsetRemote: unset}, nil
}

// engineOptions gives the engine the River runner. Without workers it
// runs every unit in this process (placement ""), so an engine of a
// fleet without workers behaves as one without a fleet.
func (f *fleetUnits) engineOptions(o *engine.Options) {
	if f.srv != nil {
		r := f.srv.Runner(f.cat)
		r.LeaderEpoch = f.leaderEpoch.Load
		r.Progress = fleet.NewUnitProgress(f.cat, f.svc.Logger())
		o.UnitRunner = r
	}
}

// lead is the start of this server's holding of the schedules lease, as
// holder: the units it hands off from now on carry the lease's epoch, and
// every VM unit granted before (by the previous leader, whose units may
// still run) holds its pools in eng until it ends (fleet.HoldGrants), so
// that admission resumes at once without granting past a limit; and the
// operations the other servers forward run here (forwardHere). It
// returns the grants (nil without a fleet) and the function that ends
// the holding, which leaves the engine without workers: a unit it still
// holds is not handed off under a stale epoch.
func (f *fleetUnits) lead(ctx context.Context, eng *engine.Engine, holder string, log *slog.Logger) (*fleet.Grants, func()) {
	if f.srv == nil {
		return nil, func() {}
	}
	l, err := f.cat.GetLease(ctx, leader.Schedules)
	switch {
	case err != nil:
		log.Warn("the schedules lease cannot be read: the units handed off are refused by the workers until it can", "err", err)
	case l.Holder != holder:
		log.Warn("the schedules lease passed to another server already", "holder", l.Holder, "epoch", l.Epoch)
	default:
		f.leaderEpoch.Store(l.Epoch)
	}
	grants, err := fleet.HoldGrants(ctx, f.srv.Queue, eng, log)
	if err != nil {
		// Admission goes on: a unit of the previous leader that still
		// runs may then share its worker with a new one.
		log.Error("the units granted before this server took the schedules over cannot be listed: they are not counted", "err", err)
	} else {
		log.Info("admission resumes after the takeover", "leader_epoch", l.Epoch, "units_held", grants.Len())
	}
	endForward := f.forwardHere(ctx, holder, log)
	return grants, func() {
		endForward()
		f.leaderEpoch.Store(0)
		if grants != nil {
			grants.Release()
		}
		f.unfollow(eng, log)
	}
}

// follow is the watch's hooks for eng: each look at the registry gives
// the engine the ready workers, and a worker declared lost has its
// repository sessions ended, then its running attempts re-admitted.
// Until a first worker is ready the engine is left without workers,
// running everything itself. The cleanup after lost workers (their
// snapshots on the hypervisor) is driven from the registry's state: at
// the first look of this holding, for every registration it holds lost
// (a predecessor may have died before its cleanup ended), then for each
// one declared lost.
func (f *fleetUnits) follow(ctx context.Context, eng *engine.Engine, grants *fleet.Grants, log *slog.Logger) (observed func([]fleet.Worker),
	onLost func(context.Context, []fleet.Worker)) {
	if f.srv == nil {
		return nil, nil
	}
	cleanups := &lostCleanups{handed: map[fleet.LostWorker]bool{}}
	var first sync.Once
	observed = func(ws []fleet.Worker) {
		first.Do(func() { f.cleanUpAfter(ctx, cleanups.take(ws), log) })
		f.srv.Epochs.Observe(ws) // before the engine may place units on them
		if grants != nil {
			grants.Observe(ws)
		}
		ready := fleet.EngineWorkers(ws)
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(ready) == 0 && !f.followed {
			return
		}
		f.followed = true
		if err := eng.SetWorkers(ready); err != nil {
			log.Warn("the registry's workers cannot be given to the engine", "err", err)
			return
		}
		names := make([]string, len(ready))
		for i, w := range ready {
			names[i] = w.Name
		}
		if n := strings.Join(names, ","); n != f.names {
			f.names = n
			log.Info("the engine places units on the workers", "workers", n)
		}
	}
	onLost = func(ctx context.Context, lost []fleet.Worker) {
		f.srv.Epochs.Lost(lost) // before their units are re-admitted: a point they send back is refused
		for _, w := range lost {
			// First, so that the re-admitted units deduplicate against
			// what the lost attempts stored (they start only once
			// WorkerLost cancels them).
			f.srv.Sessions.EndWorker(ctx, w)
			if n := eng.WorkerLost(w.Name); n > 0 {
				log.Warn("a lost worker's running units are re-admitted", "worker", w.Name, "units", n)
			}
		}
		f.cleanUpAfter(ctx, cleanups.take(lost), log)
	}
	return observed, onLost
}

// cleanUpAfter removes, apart (it waits for a live worker), the
// snapshots the lost workers left on VMs that no retry backs up again.
// The removal is idempotent: a snapshot removed already is not found.
func (f *fleetUnits) cleanUpAfter(ctx context.Context, lost []fleet.Worker, log *slog.Logger) {
	if len(lost) > 0 {
		go fleet.Remote{Queue: f.srv.Queue, Workers: f.cat}.CleanupAfterLost(ctx, f.svc, lost, log)
	}
}

// lostCleanups are the lost registrations whose cleanup this holding of
// the lease handed off already.
type lostCleanups struct {
	mu     sync.Mutex
	handed map[fleet.LostWorker]bool
}

// take returns the registrations of ws that are lost and not handed yet,
// marking them handed.
func (c *lostCleanups) take(ws []fleet.Worker) []fleet.Worker {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []fleet.Worker
	for _, w := range ws {
		key := fleet.LostWorker{Worker: w.Name, Epoch: w.Epoch}
		if w.State == catalog.WorkerLost && !c.handed[key] {
			c.handed[key] = true
			out = append(out, w)
		}
	}
	return out
}

// recoverInterrupted marks failed ("interrupted") the jobs whose process
// is gone, at once on a takeover rather than at the job manager's next
// sweep: a dead leader's run is then recorded as what it is, and its
// schedule's next slot runs the policy again (docs/design/fleet.md).
func (s Ops) recoverInterrupted(ctx context.Context) {
	m, err := s.JobManager(ctx)
	if err == nil {
		_, err = m.Recover(ctx)
	}
	if err != nil {
		s.Logger().Warn("the jobs of a dead server cannot be marked interrupted at the takeover", "err", err)
	}
}

// stop stops the servers' client, giving what it runs a moment.
func (f *fleetUnits) stop(log func(msg string, args ...any)) {
	if f.srv == nil {
		return
	}
	f.unsetRemote()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.srv.Stop(ctx); err != nil {
		log("stopping the servers' queue", "err", err)
	}
}
