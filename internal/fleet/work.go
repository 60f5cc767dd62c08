package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/postgres"
	"github.com/coffer-backup/coffer/internal/fleet/queue"
	"github.com/coffer-backup/coffer/internal/service"
)

// Fence is the member's queue.FenceFunc: a job granted to another
// registration of this worker (an older epoch, a process since
// replaced), or arriving once the worker is fenced, must not run.
func (m *Member) Fence(_ context.Context, worker string, epoch int64) error {
	if err := m.fenced(); err != nil {
		return err
	}
	if worker != m.w.Name || epoch != m.w.Epoch {
		return fmt.Errorf("fleet: a job for %s at epoch %d reached %s at epoch %d: %w", worker, epoch, m.w.Name, m.w.Epoch, catalog.ErrFenced)
	}
	return nil
}

// QueueWork is a worker's work: a River client on the catalog's
// PostgreSQL database (dsn) working the worker's own queue, running the
// operations handed to it by ID and the VM units of policies' runs with
// svc (queue.NewWorker, RunVMUnit), fenced by
// the member. A drain stops it once its running operations end. It
// migrates River's schema if it is the first process to start: a worker
// that logs in with the catalog's own credentials; one with a worker's
// role uses CheckedQueueWork. A SQLite catalog has no hand-off (one host
// runs its work in the server's process, docs/design/fleet.md): the work
// ends at once with catalog.ErrNeedsPostgres.
func QueueWork(dsn string, m *Member, svc *service.Service, log *slog.Logger) Work {
	return queueWork(dsn, true, m, svc, log)
}

// CheckedQueueWork is QueueWork for a worker logged in with its own
// role, which may not migrate: River's schema was checked (CheckQueue)
// before the worker registered, and is not migrated here.
func CheckedQueueWork(dsn string, m *Member, svc *service.Service, log *slog.Logger) Work {
	return queueWork(dsn, false, m, svc, log)
}

func queueWork(dsn string, migrate bool, m *Member, svc *service.Service, log *slog.Logger) Work {
	return func(ctx context.Context, drain <-chan struct{}) error {
		if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
			return catalog.ErrNeedsPostgres
		}
		repos := newUnitRepos(svc, log)
		c, pool, err := startQueue(ctx, drain, dsn, migrate, m, svc, repos, log)
		if c == nil {
			return err // drained (nil) or fenced before the queue started
		}
		if err := waitDrain(ctx, drain); err != nil {
			return abandon(c, pool, log, err)
		}
		// Drained: running operations finish (Stop waits for them).
		err = c.Stop(context.WithoutCancel(ctx))
		pool.Close()
		return errors.Join(err, repos.close())
	}
}

// CheckQueue refuses River's schema in the catalog's database (dsn)
// unless it is exactly the version this build speaks: a worker with its
// own role checks it before it registers. An older one is waited for up
// to wait, while a server of this version migrates it
// (queue.WaitSchema); a newer one is refused at once. A version other
// than this build's is ErrQueueSkew.
func CheckQueue(ctx context.Context, dsn string, wait time.Duration, log *slog.Logger) error {
	pool, err := postgres.NewPool(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	return queue.WaitSchema(ctx, pool, wait, log)
}

// DefaultSchemaWait is how long a worker waits for the servers to
// migrate River's schema to its version before it refuses it.
const DefaultSchemaWait = 2 * time.Minute

// startQueue starts the worker's River client: River's schema first
// (migrated if this worker is the first), then the client on its queue.
// The catalog may be out of reach a moment (restarting, a blip): the
// worker tries again every retryEvery until it is drained or fenced; its
// heartbeat decides between the two meanwhile, so it neither exits while
// the servers still count on it nor runs on once fenced.
func startQueue(ctx context.Context, drain <-chan struct{}, dsn string, migrate bool, m *Member, svc *service.Service,
	repos *unitRepos, log *slog.Logger) (*queue.Client, *pgxpool.Pool, error) {
	for {
		c, pool, err := tryStartQueue(ctx, dsn, migrate, m, svc, repos, log)
		if err == nil {
			return c, pool, nil
		}
		log.Warn("the worker's queue did not start; trying again", "worker", m.w.Name, "in", retryEvery, "err", err)
		select {
		case <-drain:
			return nil, nil, nil
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(retryEvery):
		}
	}
}

// ErrQueueSkew refuses River's schema at another version than this
// build's (queue.ErrSchemaSkew).
var ErrQueueSkew = queue.ErrSchemaSkew

// retryEvery is how often a worker tries again to start its queue.
const retryEvery = time.Second

func tryStartQueue(ctx context.Context, dsn string, migrate bool, m *Member, svc *service.Service, repos *unitRepos,
	log *slog.Logger) (*queue.Client, *pgxpool.Pool, error) {
	pool, err := postgres.NewPool(ctx, dsn)
	if err != nil {
		return nil, nil, err
	}
	c, err := queue.NewWorker(pool, queue.Config{Name: m.w.Name, Epoch: m.w.Epoch, Slots: m.w.Slots, Service: svc,
		Fence: m.Fence, LeaderFence: LeaderFence(svc), VMUnit: RunVMUnit(svc, repos, m.latency, log), Batch: RunBatch(svc, repos, m.latency, log), ID: m.w.Name + "@" + m.w.Host, Logger: log})
	if err == nil && migrate {
		_, err = queue.Migrate(ctx, pool)
	}
	if err == nil {
		err = c.Start(ctx)
	}
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return c, pool, nil
}

// stopGrace bounds how long a fenced worker waits for its queue's client
// to stop.
const stopGrace = 5 * time.Second

// abandon stops a fenced or stopped worker's client: the operations'
// contexts are cancelled already, but the client's own calls to a catalog
// that may be out of reach (a partition: no reset, only TCP's timeouts)
// can hang for long. The worker does not wait for them past stopGrace:
// it is fenced, so nothing it still sends is accepted, and its process
// ends (a supervisor restarts it under a new epoch).
func abandon(c *queue.Client, pool *pgxpool.Pool, log *slog.Logger, why error) error {
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = c.Stop(context.Background())
		pool.Close()
	}()
	select {
	case <-stopped:
	case <-time.After(stopGrace):
		log.Warn("the worker's queue did not stop within its grace: the catalog is out of reach; leaving it", "grace", stopGrace)
	}
	return why
}

func waitDrain(ctx context.Context, drain <-chan struct{}) error {
	select {
	case <-drain:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
