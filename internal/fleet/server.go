package fleet

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/postgres"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/fleet/queue"
	"github.com/coffer-backup/coffer/internal/service"
)

// Server is a server's side of the hand-off: River's schema migrated, and
// a River client on the servers' queue (queue.NewServer: River's
// maintenance runs only in servers' clients) through which the
// schedules' engine hands VM units to the workers.
type Server struct {
	Queue *queue.Client
	// Sessions ends the repository sessions of the workers given up on
	// (lost, fenced), so that their units' retries reuse what they stored.
	Sessions *Sessions
	// Epochs is the registry as the leader's watch follows it (the
	// server's owner feeds it: Epochs.Observe, Epochs.Lost): the units'
	// epochs are taken from it, not read from the catalog per unit.
	Epochs *Epochs
	pool   *pgxpool.Pool
}

// IsPostgres reports whether the catalog at dsn is PostgreSQL, the only
// catalog work is handed off on (docs/design/fleet.md: a SQLite single
// host runs everything in the server's process).
func IsPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// StartServer migrates River's schema in the catalog's database at dsn
// and starts the server's client, which runs svc's operations handed to
// the servers' queue.
func StartServer(ctx context.Context, dsn string, svc *service.Service, log *slog.Logger) (*Server, error) {
	pool, err := postgres.NewPool(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	if _, err := queue.Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	c, err := queue.NewServer(pool, queue.Config{Service: svc, Logger: log})
	if err == nil {
		err = c.Start(ctx)
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &Server{Queue: c, Sessions: &Sessions{Open: svc.OpenNamed, Log: log}, Epochs: &Epochs{}, pool: pool}, nil
}

// Stop stops the server's client, letting what it runs finish unless ctx
// ends first.
func (s *Server) Stop(ctx context.Context) error {
	err := s.Queue.Stop(ctx)
	s.pool.Close()
	return err
}

// Runner is the engine's UnitRunner over this server's client: units go
// to the workers of the registry cat, under the epochs the watch saw
// (s.Epochs; cat is read only for a worker it has not seen).
func (s *Server) Runner(cat catalog.Workers) *UnitRunner {
	return &UnitRunner{Queue: s.Queue, Sessions: s.Sessions, RecordGrants: true, Epoch: func(ctx context.Context, worker string) (int64, error) {
		return s.Epochs.epochOf(ctx, cat, worker)
	}}
}

// EpochOf is the registration of a worker not lost.
func EpochOf(ctx context.Context, cat catalog.Workers, worker string) (int64, error) {
	ws, err := cat.ListWorkers(ctx)
	if err != nil {
		return 0, err
	}
	for _, w := range ws {
		if w.Name == worker && w.State != catalog.WorkerLost {
			return w.Epoch, nil
		}
	}
	return 0, fmt.Errorf("fleet: worker %s is not registered, or lost", worker)
}

// EngineWorkers are the workers of the registry the dispatcher may place
// units on: the ready ones (a starting worker has no queue yet, a
// draining one takes no new work, a lost one is gone).
func EngineWorkers(ws []Worker) []engine.Worker {
	var out []engine.Worker
	for _, w := range ws {
		if w.State != catalog.WorkerReady {
			continue
		}
		r := w.Reach
		out = append(out, engine.Worker{Name: w.Name, Slots: w.Slots, Reach: engine.Reach{Connections: r.Connections, Hosts: r.Hosts,
			Datastores: r.Datastores, Libraries: r.Libraries, Repositories: r.Repositories, CanBoot: r.CanBoot}})
	}
	return out
}

// BootWorkers are the names of the ready workers of ws that can run QEMU
// (boot verification) and write repository ("" : the default).
func BootWorkers(ws []Worker, repository string) []string {
	repository = cmp.Or(repository, "default")
	var out []string
	for _, w := range ws {
		r := w.Reach
		if w.State == catalog.WorkerReady && r.CanBoot && (len(r.Repositories) == 0 || slices.Contains(r.Repositories, repository)) {
			out = append(out, w.Name)
		}
	}
	return out
}
