// Package engine turns policies into backups: it inventories hypervisor
// connections, selects VMs, records a job with one task per VM in the
// catalog, and runs the tasks through backup.BackupVM (a group run:
// backup.PlanVM and backup.RunVM around its batch snapshots) with every
// concurrency limit enforced at once by one central dispatcher (see
// dispatch.go), an I/O rate limit per task and in total, timeouts on each
// hypervisor operation and on each VM, retries with backoff for transient
// hypervisor errors, failure isolation between VMs, and cancellation that
// always releases hypervisor sessions.
//
// The engine is a library: `coffer run` calls Engine.Run once, and the
// server (later) keeps one Engine and a Scheduler running policies on their
// cron schedules. It never prints; progress is polled with Job.Progress and
// everything that happened is recorded in the catalog as events.
//
// # Locks
//
//	dispatcher.mu   resource counters and the queue (never held while running work)
//	Job.mu          task records and progress of one job
//	recorder.mu     pending catalog writes
//	Engine.mu       opened repositories (and those a reload retired)
//
// No goroutine holds two of these at once.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine/latency"
	"github.com/coffer-backup/coffer/internal/engine/ratelimit"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/iolatency"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
)

// Runner backs up one VM; the default is backup.BackupVM. Benchmarks and
// tests of scheduling may substitute their own. A group run's reads from a
// storage snapshot (group.go) do not go through it: their snapshot was
// taken in the batch, and backup.RunVM reads it.
type Runner func(ctx context.Context, w *repo.Writer, conn hypervisor.Connector, req backup.VMRequest, o backup.Options) (*repo.Point, error)

// Options configure an Engine.
type Options struct {
	Config  *policy.Config
	Catalog catalog.Catalog
	// Connectors by connection name.
	Connectors map[string]hypervisor.Connector
	// OpenRepository opens a repository by name ("" is the default
	// repository). Nil only with a Runner that ignores the writer.
	OpenRepository func(ctx context.Context, name string) (*repo.Repository, error)
	// StorageSnapshotters by connection name, for policies with group:
	// datastore.
	StorageSnapshotters map[string]hypervisor.StorageSnapshotter
	Runner              Runner
	// UnitRunner runs each VM attempt where the dispatcher placed it
	// (default InProcess: here).
	UnitRunner UnitRunner
	Logger     *slog.Logger
	// Worker names this engine in job records (default: the host name).
	Worker string
	// FlushInterval is how often catalog writes are batched (default 1s).
	FlushInterval time.Duration
	// Workers is backup.Options.Workers per task (default: the pipeline's).
	Workers int
	// StartJob, when set, records every job the engine runs (policy
	// runs, cleanups, skipped runs) as a task of the control plane:
	// StartJob: engine.Starter(tasks.StartJob), tasks an internal/job
	// Manager (the user of the context starts the task; subscribers of
	// this process get its events at once, and a cancel here is
	// immediate). Without it jobs are recorded in Catalog directly, with
	// this process as owner, progress and a heartbeat, and a cancel
	// request in the catalog stops them within FlushInterval.
	StartJob func(ctx context.Context, j catalog.Job) (JobRun, error)
	// Predict, when set, predicts every policy run as it starts; the
	// prediction is recorded in the job's log (predict.go).
	Predict Predictor
	// LatencySources, when set, adds latency sources to a datastore that
	// the latency-control section watches, beside its block device and
	// the disks of the VMs being read (package latency): an array's own
	// statistics, or a test's scripted latency.
	LatencySources func(connection, datastore string) []iolatency.Source
}

// Engine runs jobs. Safe for concurrent use; jobs started concurrently
// share its limits.
type Engine struct {
	o     Options
	cur   atomic.Pointer[setup] // what new jobs run with (reload.go)
	disp  *dispatcher
	total *rate.Limiter  // the I/O rate in total (unlimited: rate.Inf)
	watch *latency.Watch // datastores' latency while tasks read them
	log   *slog.Logger
	bg    sync.WaitGroup

	mu      sync.Mutex
	repos   map[string]*repo.Repository
	retired []*repo.Repository // dropped by a reload, closed with the engine

	live liveJobs // the jobs running (Interrupt)
}

// New creates an engine and cleans up what crashed coffer processes left on
// every connector (see Cleanup).
func New(ctx context.Context, o Options) (*Engine, error) {
	if o.Config == nil {
		o.Config = &policy.Config{}
	}
	if o.Catalog == nil {
		return nil, errors.New("engine: no catalog")
	}
	if o.Runner == nil {
		o.Runner = backup.BackupVM
	}
	if o.UnitRunner == nil {
		o.UnitRunner = InProcess{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Worker == "" {
		o.Worker, _ = os.Hostname()
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = time.Second
	}
	limits := o.Config.Limits.WithDefaults()
	e := &Engine{o: o, disp: newDispatcher(limits.Tasks), total: ratelimit.NewTotal(limits.Rate), log: o.Logger, repos: map[string]*repo.Repository{},
		watch: latency.NewWatch(o.LatencySources)}
	e.cur.Store(&setup{cfg: o.Config, limits: limits, conns: o.Connectors, storage: o.StorageSnapshotters})
	return e, e.Cleanup(ctx)
}

// Cleanup asks every connector to remove what crashed coffer processes left
// behind (snapshots, bitmaps, exports, overlays). Whatever was found is
// recorded as a job of kind "cleanup" with one event per object; nothing
// is recorded when there was nothing to do. Errors are returned joined but
// do not stop the other connectors.
func (e *Engine) Cleanup(ctx context.Context) error {
	var errs []error
	var events []catalog.Event
	for _, name := range sortedKeys(e.o.Connectors) {
		found, err := e.o.Connectors[name].CleanupLeftovers(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("cleanup on connection %s: %w", name, err))
			events = append(events, catalog.Event{Time: time.Now(), Level: "error", Kind: "cleanup",
				Message: fmt.Sprintf("cleaning up leftovers on %s failed: %v", name, err)})
		}
		for _, l := range found {
			e.log.Info("removed leftover", "connection", name, "vm", l.VM.Name, "kind", l.Kind, "name", l.Name, "action", l.Action)
			events = append(events, catalog.Event{Time: time.Now(), Level: "warn", Kind: "cleanup",
				Message: fmt.Sprintf("%s: %s %s of VM %s %s (left by an interrupted coffer)", name, l.Kind, l.Name, l.VM.Name, l.Action),
				Fields:  map[string]any{"connection": name, "vm": l.VM.Name, "vm_id": l.VM.ID, "kind": l.Kind, "name": l.Name, "action": l.Action}})
		}
	}
	// Storage snapshots a killed coffer left: each provider removes what
	// its journals name (they share the state directory, so the first
	// one finds them all).
	for _, name := range sortedKeys(e.o.StorageSnapshotters) {
		sc, ok := e.o.StorageSnapshotters[name].(hypervisor.StorageCleaner)
		if !ok {
			continue
		}
		found, err := sc.CleanupLeftovers(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("storage snapshot cleanup for connection %s: %w", name, err))
			events = append(events, catalog.Event{Time: time.Now(), Level: "error", Kind: "cleanup",
				Message: fmt.Sprintf("cleaning up storage snapshots for %s failed: %v", name, err)})
		}
		for _, l := range found {
			e.log.Info("removed leftover", "connection", name, "kind", l.Kind, "name", l.Name, "action", l.Action)
			events = append(events, catalog.Event{Time: time.Now(), Level: "warn", Kind: "cleanup",
				Message: fmt.Sprintf("%s: %s %s of %s %s (left by an interrupted coffer)", name, l.Kind, l.Name, l.VM.Name, l.Action),
				Fields:  map[string]any{"connection": name, "kind": l.Kind, "name": l.Name, "action": l.Action}})
		}
	}
	if len(events) == 0 {
		return errors.Join(errs...)
	}
	now := time.Now()
	run, err := e.startRun(ctx, catalog.Job{Kind: catalog.KindCleanup, Object: "/system", Status: catalog.StatusRunning,
		Worker: e.o.Worker, CreatedAt: now, StartedAt: now})
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	run.Record(events...)
	status, msg := catalog.StatusSuccess, ""
	if len(errs) > 0 {
		status, msg = catalog.StatusFailed, errors.Join(errs...).Error()
	}
	if _, err := run.Finish(ctx, status, msg); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// repository opens (once) and returns a named repository.
func (e *Engine) repository(ctx context.Context, name string) (*repo.Repository, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.repos[name]; ok {
		return r, nil
	}
	if e.o.OpenRepository == nil {
		return nil, nil
	}
	r, err := e.o.OpenRepository(ctx, name)
	if err != nil {
		return nil, err
	}
	e.repos[name] = r
	return r, nil
}

// background runs cleanup of abandoned hypervisor calls, tracked by Wait.
func (e *Engine) background(f func()) {
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		f()
	}()
}

// Close waits for background cleanups (sessions of hypervisor calls that
// outlived their timeouts) and closes the repositories it opened.
func (e *Engine) Close() error {
	e.bg.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for name, r := range e.repos {
		if err := r.Close(); err != nil {
			errs = append(errs, err)
		}
		delete(e.repos, name)
	}
	for _, r := range e.retired {
		if err := r.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	e.retired = nil
	return errors.Join(errs...)
}

// Run runs one policy to completion.
func (e *Engine) Run(ctx context.Context, p policy.Policy) (*Result, error) {
	j, err := e.Start(ctx, p)
	if err != nil {
		return nil, err
	}
	return j.Wait()
}

// Connector is the connector the engine runs connection name's jobs
// through, if it has one: a backup started elsewhere in the process
// (the server's API) finds its VM through it and runs here, under the
// same limits.
func (e *Engine) Connector(name string) (hypervisor.Connector, bool) {
	c, ok := e.cur.Load().conns[name]
	return c, ok && c != nil
}

// Slots lists the limits' slot pools with the slots in use now (metrics):
// pools appear as jobs first need them.
func (e *Engine) Slots() []Slot { return e.disp.slots() }
