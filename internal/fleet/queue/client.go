package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/coffer-backup/coffer/internal/service"
)

// Config is a River client's: the process that works a queue.
type Config struct {
	// Name is the worker's name (its queue is w-<Name>); NewServer
	// ignores it and works ServerQueue.
	Name string
	// Epoch is this process's registration: a job granted to an older
	// epoch of the same worker is stale and completes as a no-op (0: the
	// registry's Fence alone decides).
	Epoch int64
	// Slots is how many operations run at once (River's MaxWorkers): a
	// server's; or the worker's task slots, which the dispatcher counts
	// as its pool (a worker's client runs OperationHeadroom more).
	Slots int
	// Service runs the operations by ID (its Config.Operations).
	Service *service.Service
	// VMUnit runs the VM units handed to this worker (coffer_vm_unit);
	// nil: they fail, saying so.
	VMUnit VMUnitFunc
	// Batch runs the group batches handed to this worker (coffer_batch);
	// nil: they fail, saying so.
	Batch BatchFunc
	// Fence is checked before each job runs (nil: nothing is fenced; for
	// a server's own queue).
	Fence FenceFunc
	// LeaderFence is checked before each VM unit runs, after Fence (nil:
	// any leader's unit runs).
	LeaderFence LeaderFenceFunc
	// Lease is, on the leader's client (NewLeader), the epoch of the
	// schedules lease this server holds now, checked before each
	// forwarded job runs: an error (it no longer holds it) completes the
	// job as fenced, to be forwarded again. The epoch is recorded on the
	// job's row as it starts (Outcome.LeaderEpoch), so that its forwarder
	// can tell when the leader that took it was replaced (TakenUnder).
	Lease LeaseFunc
	// ID names the River client in River's tables (attempted_by; default
	// River's own, host name and time).
	ID     string
	Logger *slog.Logger
	// RescueStuckJobsAfter is River's rescue of a job that runs that long
	// (default River's, an hour). It only matters on servers, where
	// River's maintenance runs; coffer's heartbeats re-admit much sooner.
	RescueStuckJobsAfter time.Duration
}

// Client is a River client on the catalog's database: it submits
// hand-offs, and works its queue once started.
type Client struct {
	river  *river.Client[pgx.Tx]
	pool   *pgxpool.Pool
	waiter *waiter
	queue  string
	// endRead, if set (by tests, before any Wait), is told of each read
	// of a hand-off's row for its end (ended), and whether it had ended:
	// what a notice carrying the outcome saves.
	endRead func(id int64, ended bool)
}

// NewWorker is the client of the worker cfg.Name: it works only its own
// queue, and takes no part in River's leader election.
//
// A worker fetches the moment a job is inserted (River's LISTEN on
// PostgreSQL) and then at most every FetchCooldown: River's least, 1 ms,
// rather than its 100 ms, since admission-to-start latency is what a
// worker's fetch rate buys, and a worker's queue is quiet (it fetches
// when told of an insert or when a slot frees after a fetch found none,
// not more often). A unit granted as another ends on the same worker can
// reach it before River frees that slot: its fetch finds none, and the
// next one waits out the cooldown.
//
// River runs up to the worker's slots plus OperationHeadroom jobs at
// once: the slots bound its units, and the leader's admission holds them
// to it (it grants a unit only into a free slot, and a new leader holds
// the slots of the units still running); River's bound is not that
// limit. The headroom is for the operations run on the worker by name
// (listing a connection's VMs, a restore, a file extraction, a boot
// verification, a tape job), which share the queue: bounded by the slots
// alone, they waited behind backups that may take hours, and a server
// could not even list a connection's VMs while its workers were full.
func NewWorker(pool *pgxpool.Pool, cfg Config) (*Client, error) {
	q, err := WorkerQueue(cfg.Name)
	if err != nil {
		return nil, err
	}
	cfg.Slots = max(cfg.Slots, 1) + OperationHeadroom
	return newClient(pool, cfg, q, false)
}

// OperationHeadroom is how many jobs beyond its slots a worker's client
// runs at once (NewWorker says why).
const OperationHeadroom = 4

// NewServer is a server's client, working ServerQueue with River's leader
// election on. Every server must run one: River elects its leader, and
// runs its maintenance (the rescuer, the cleaner that deletes finished
// rows after a day, the scheduler) only in clients that both work a queue
// and take part in the election, and workers take none, so that a fleet
// of workers does not campaign and run maintenance from every host.
// River's leader need not be coffer's leader (the schedules lease): both
// are harmless to each other.
func NewServer(pool *pgxpool.Pool, cfg Config) (*Client, error) {
	cfg.Name = "server"
	return newClient(pool, cfg, ServerQueue, true)
}

// fetchCooldown is every client's FetchCooldown (NewWorker says why on a
// worker). River also limits the insert NOTIFYs a client sends to one per
// queue per FetchCooldown, so on a server, which inserts the workers'
// units, it must be short too: at 10 ms, a second unit granted to a
// worker within 10 ms of the first went unannounced, and waited for that
// worker's next fetch (a slot freed, or the 1 s poll) if the worker had
// fetched between the two commits.
const fetchCooldown = river.FetchCooldownMin

func newClient(pool *pgxpool.Pool, cfg Config, queue string, leader bool) (*Client, error) {
	if cfg.Service == nil {
		return nil, errors.New("fleet: a queue's client needs a service to run operations")
	}
	slots := max(cfg.Slots, 1)
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	c := &Client{pool: pool, queue: queue, waiter: newWaiter(pool)}
	workers := river.NewWorkers()
	ops := &operationWorker{client: c, name: cfg.Name, epoch: cfg.Epoch, svc: cfg.Service, fence: cfg.Fence, lease: cfg.Lease, log: logger}
	if err := river.AddWorkerSafely(workers, ops); err != nil {
		return nil, err
	}
	units := &vmUnitWorker{ops: ops, run: cfg.VMUnit, leader: cfg.LeaderFence}
	if err := river.AddWorkerSafely(workers, units); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(workers, &batchWorker{units: units, run: cfg.Batch}); err != nil {
		return nil, err
	}
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema:                 Schema,
		ID:                     cfg.ID,
		Queues:                 map[string]river.QueueConfig{queue: {MaxWorkers: slots}},
		Workers:                workers,
		FetchCooldown:          fetchCooldown,
		FetchOnlyKnownKinds:    true,
		LeaderElectionDisabled: !leader,
		// No timeout: an operation runs as long as it needs (a VM's
		// backup takes hours), coffer's heartbeats find a dead worker
		// within seconds, and its cancel ends an operation.
		JobTimeout: -1,
		// Retries are coffer's (MaxAttempts 1 on every insert); this is
		// the default for inserts that would not say.
		MaxAttempts:          1,
		RescueStuckJobsAfter: cfg.RescueStuckJobsAfter,
		Logger:               logger.With("component", "river", "queue", queue),
	})
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	c.river = rc
	return c, nil
}

// Start works the client's queue until Stop.
func (c *Client) Start(ctx context.Context) error { return c.river.Start(ctx) }

// Stop lets running operations finish (a drain), then stops; if ctx ends
// first, their contexts are cancelled and Stop waits for them to return.
func (c *Client) Stop(ctx context.Context) error {
	defer c.waiter.close()
	err := c.river.Stop(ctx)
	if ctx.Err() != nil {
		return errors.Join(err, c.river.StopAndCancel(context.WithoutCancel(ctx)))
	}
	return err
}

// Queue is the queue this client works.
func (c *Client) Queue() string { return c.queue }
