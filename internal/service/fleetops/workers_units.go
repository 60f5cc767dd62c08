package fleetops

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/fleet"
)

// fleetUnits is the schedules' engine's side of the fleet's workers: on a
// PostgreSQL catalog, a River client on the servers' queue hands the
// engine's units to the workers the registry lists (fleet.UnitRunner).
// The zero value (a SQLite catalog) changes nothing: every unit runs in
// this process, as before.
type fleetUnits struct {
	srv *fleet.Server
	cat catalog.Workers
	// unsetRemote ends the service's use of srv for requests that name
	// a worker (service.OnWorker).
	unsetRemote func()

	mu       sync.Mutex
	followed bool   // the engine was given workers once: it is a fleet's
	names    string // the workers it was given last, for the log
}

// startFleet starts the server's side of the hand-off when the catalog is
// PostgreSQL (River's schema migrated, the servers' client started).
func (s Ops) startFleet(ctx context.Context, cat catalog.Workers) (*fleetUnits, error) {
	if !fleet.IsPostgres(s.Config.Catalog) {
		return &fleetUnits{}, nil
	}
	srv, err := fleet.StartServer(ctx, s.Config.Catalog, s.Service, s.Logger())
	if err != nil {
		return nil, err
	}
	unset := s.SetRemote(fleet.Remote{Queue: srv.Queue, Workers: cat})
	return &fleetUnits{srv: srv, cat: cat, unsetRemote: unset}, nil
}

// engineOptions gives the engine the River runner. Without workers it
// runs every unit in this process (placement ""), so an engine of a
// fleet without workers behaves as one without a fleet.
func (f *fleetUnits) engineOptions(o *engine.Options) {
	if f.srv != nil {
		o.UnitRunner = f.srv.Runner(f.cat)
	}
}

// follow is the watch's hooks for eng: each look at the registry gives
// the engine the ready workers, and a worker declared lost has its
// repository sessions ended, then its running attempts re-admitted.
// Until a first worker is ready the engine is left without workers,
// running everything itself.
func (f *fleetUnits) follow(eng *engine.Engine, log *slog.Logger) (observed func([]fleet.Worker), onLost func(context.Context, []fleet.Worker)) {
	if f.srv == nil {
		return nil, nil
	}
	observed = func(ws []fleet.Worker) {
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
		for _, w := range lost {
			// First, so that the re-admitted units deduplicate against
			// what the lost attempts stored (they start only once
			// WorkerLost cancels them).
			f.srv.Sessions.EndWorker(ctx, w)
			if n := eng.WorkerLost(w.Name); n > 0 {
				log.Warn("a lost worker's running units are re-admitted", "worker", w.Name, "units", n)
			}
		}
	}
	return observed, onLost
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
