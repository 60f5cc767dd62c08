package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine/attempt"
	"github.com/coffer-backup/coffer/internal/engine/groupread"
	"github.com/coffer-backup/coffer/internal/engine/latency"
	"github.com/coffer-backup/coffer/internal/engine/opguard"
	"github.com/coffer-backup/coffer/internal/engine/ratelimit"
	"github.com/coffer-backup/coffer/internal/fleet/queue"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/service"
)

// RunBatch is a worker's queue.BatchFunc: it runs a group: datastore
// batch the leader's dispatcher granted it, as the engine does in its own
// process (internal/engine/group.go), from this worker's configuration in
// effect: every VM snapshotted at once (held), one storage snapshot of
// the datastore with this worker's provider for the connection, the VM
// snapshots released, then each VM read from the storage snapshot
// (groupread.Read), at most b.Reads at once, into the job's write session
// on this worker. Each VM's events go to its own task, and its outcome
// (its point, or its error) to the batch's outcome.
//
// Nothing stays behind: the VM snapshots are closed and the storage
// snapshot deleted however the batch ends; a killed worker's VM
// snapshots name its registration (SessionOwner), so that a retry, or
// this worker's cleanup at its next start, removes them, and its storage
// snapshot is its provider's leftover, which the provider's cleanup
// removes (engine.Cleanup's storage cleaners, CleanupLeftovers here).
func RunBatch(svc *service.Service, repos *unitRepos, watch *latency.Watch, log *slog.Logger) queue.BatchFunc {
	pace := newUnitPace(watch, log)
	return func(ctx context.Context, b queue.Batch) queue.BatchDone {
		run, err := openBatch(ctx, svc, repos, log, b)
		if err != nil {
			return allFailed(b, err)
		}
		defer run.close()
		run.pace = pace
		return run.run(ctx)
	}
}

// batchRun is a batch on this worker, with what it opened.
type batchRun struct {
	b       queue.Batch
	cfg     *policy.Config
	p       policy.Policy
	cat     catalog.Catalog
	conns   *service.Connectors
	storage hypervisor.StorageSnapshotter
	w       *repo.Writer
	done    func(error) error
	history []*repo.Point
	log     *slog.Logger
	pace    *unitPace
	evs     []unitEvents // by VM, in b.VMs' order
	failed  atomic.Bool
}

func openBatch(ctx context.Context, svc *service.Service, repos *unitRepos, log *slog.Logger, b queue.Batch) (_ *batchRun, err error) {
	cfg, err := repos.configFor(ctx, b.Job)
	if err != nil {
		return nil, err
	}
	p, err := unitPolicy(svc, cfg, b.Unit(queue.BatchVM{}))
	if err != nil {
		return nil, err
	}
	r := &batchRun{b: b, cfg: cfg, p: p, log: log}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	if r.cat, err = svc.OpenCatalog(ctx); err != nil {
		return nil, err
	}
	if r.conns, err = svc.OpenConnectors(ctx, cfg, []string{b.Connection}); err != nil {
		return nil, err
	}
	if r.storage = r.conns.Storage[b.Connection]; r.storage == nil {
		return nil, service.Invalidf("worker %s has no storage snapshot provider for connection %s (group: datastore)", b.Worker, b.Connection)
	}
	ur, err := openRepo(ctx, repos, p.Repository)
	if err != nil {
		return nil, err
	}
	if r.history, err = ur.historyFor(ctx, b.Job); err != nil {
		return nil, err
	}
	r.w, r.done, err = ur.writers.writer(ctx, ur.r, b.Job, SessionOwner(b.Worker, b.Epoch), fmt.Sprintf("job %d policy %s worker %s", b.Job, p.Name, b.Worker))
	if err != nil {
		return nil, fmt.Errorf("open a write session: %w", err)
	}
	// Every VM's first event in one fenced write (unitEvents.record's
	// patience): each VM's attempt starts here.
	starts := make([]catalog.Event, len(b.VMs))
	for i, vm := range b.VMs {
		r.evs = append(r.evs, unitEvents{cat: r.cat, u: b.Unit(vm), log: log})
		starts[i] = catalog.Event{JobID: b.Job, TaskID: vm.Task, Level: "info", Kind: "worker",
			Message: fmt.Sprintf("%s: attempt %d runs on worker %s, in the batch of datastore %s", vm.VMName, vm.Attempt, b.Worker, b.Datastore),
			Fields:  map[string]any{"worker": b.Worker, "attempt": vm.Attempt, "datastore": b.Datastore}}
	}
	ectx, cancel := context.WithTimeout(ctx, eventPatience)
	defer cancel()
	if err := r.cat.AddWorkerEvents(ectx, b.Worker, b.Epoch, starts); err != nil {
		log.Warn("cannot record a batch's events", "job", b.Job, "datastore", b.Datastore, "err", err)
	}
	return r, nil
}

func (r *batchRun) close() {
	if r.done != nil {
		var err error
		if r.failed.Load() {
			err = errors.New("a VM of the batch failed")
		}
		if derr := r.done(err); derr != nil {
			r.log.Warn("closing the batch's write session", "job", r.b.Job, "err", derr)
		}
	}
	if r.conns != nil {
		r.conns.Close()
	}
	if r.cat != nil {
		_ = r.cat.Close() // a kept-open catalog's Close does nothing
	}
}

// held is a VM of the batch whose snapshot is held.
type held struct {
	i int // in b.VMs
	groupread.Held
}

// run is steps 1 to 4, and the outcome per VM.
func (r *batchRun) run(ctx context.Context) queue.BatchDone {
	out := make([]queue.BatchVMDone, len(r.b.VMs))
	for i, vm := range r.b.VMs {
		out[i].Task = vm.Task
	}
	fail := func(i int, err error) {
		r.failed.Store(true)
		r.evs[i].record(ctx, "warn", "worker", fmt.Sprintf("%s: attempt %d on worker %s failed: %v", r.b.VMs[i].VMName, r.b.VMs[i].Attempt, r.b.Worker, err), nil)
		out[i] = queue.VMError(r.b.VMs[i].Task, err, errors.Is(err, hypervisor.ErrTransient))
	}
	start := time.Now()
	hs := r.snapshot(ctx, fail)
	if len(hs) == 0 {
		return queue.BatchDone{VMs: out}
	}
	ss, err := r.storage.SnapshotDatastore(ctx, r.b.Datastore, groupread.Label(r.b.Job, r.b.Datastore, start), disksOn(hs, r.b.Datastore))
	if err != nil {
		r.closeAll(hs)
		fallback := errors.Is(err, hypervisor.ErrStorageUnsupported) && r.p.StorageFallback == "vm"
		for _, h := range hs {
			if fallback {
				out[h.i] = queue.BatchVMDone{Task: r.b.VMs[h.i].Task, Fallback: true}
				continue
			}
			fail(h.i, fmt.Errorf("storage snapshot of %s: %w", r.b.Datastore, err))
		}
		return queue.BatchDone{VMs: out}
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), backup.CloseTimeout)
		defer cancel()
		if err := ss.Delete(dctx); err != nil {
			r.log.Warn("deleting the batch's storage snapshot", "datastore", r.b.Datastore, "err", err)
		}
	}()
	var wg sync.WaitGroup
	for _, h := range hs {
		wg.Go(func() {
			if err := h.Sess.Release(ctx); err != nil {
				r.evs[h.i].record(ctx, "warn", "snapshot-release", fmt.Sprintf("releasing the VM snapshot early failed (it is removed at the end): %v", err), nil)
			}
		})
	}
	wg.Wait()
	r.log.Info("batch snapshotted", "job", r.b.Job, "datastore", r.b.Datastore, "vms", len(hs), "seconds", time.Since(start).Seconds())
	sem := make(chan struct{}, max(r.b.Reads, 1))
	for _, h := range hs {
		h.Storage = ss
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			pt, err := r.read(ctx, h)
			if err != nil {
				fail(h.i, err)
				return
			}
			if out[h.i].UnitDone, err = unitDone(pt); err != nil {
				fail(h.i, err)
			}
		})
	}
	wg.Wait()
	return queue.BatchDone{VMs: out}
}

// snapshot is step 1: every VM's snapshot, held, at once. A VM whose
// snapshot failed is failed.
func (r *batchRun) snapshot(ctx context.Context, fail func(int, error)) []*held {
	conn := r.conns.Conns[r.b.Connection]
	var mu sync.Mutex
	var hs []*held
	var wg sync.WaitGroup
	for i, vm := range r.b.VMs {
		wg.Go(func() {
			ref := hypervisor.VMRef{ID: vm.VMID, Name: vm.VMName}
			plan := backup.PlanVM(r.history, repo.Source{Kind: conn.Kind(), Connection: r.b.Connection, VMID: vm.VMID, VMName: vm.VMName}, vm.Mode)
			to := r.p.Timeouts
			req := plan.SnapshotRequest(hypervisor.SnapshotRequest{SessionID: fmt.Sprintf("job%d-task%d-%d", r.b.Job, vm.Task, vm.Attempt),
				Mode: hypervisor.SnapshotMode(vm.SnapshotMode), Quiesce: hypervisor.QuiescePolicy(r.p.Quiesce), Chain: attempt.Chain(r.p), Hold: true,
				Timeouts: hypervisor.Timeouts{SnapshotCreate: to.SnapshotCreate, SnapshotRemove: to.SnapshotRemove, Quiesce: to.Quiesce, Setup: to.Setup},
				Owner:    SessionOwner(r.b.Worker, r.b.Epoch), OwnerGone: OwnerGone(r.cat)})
			sess, err := r.guard(conn, i).Snapshot(ctx, ref, req)
			if err != nil {
				fail(i, fmt.Errorf("snapshot %s: %w", vm.VMName, err))
				return
			}
			mu.Lock()
			hs = append(hs, &held{i: i, Held: groupread.Held{VM: hypervisor.VM{VMRef: ref}, Sess: sess, Plan: plan}})
			mu.Unlock()
		})
	}
	wg.Wait()
	return hs
}

// guard is the connector guarded by the policy's timeouts, its
// operations noted in VM i's task.
func (r *batchRun) guard(conn hypervisor.Connector, i int) *opguard.Guard {
	vm := r.b.VMs[i].VMName
	return opguard.New(conn, r.p.Timeouts, func(kind string, took time.Duration, err error) {
		level, msg := "info", fmt.Sprintf("%s of %s took %s", kind, vm, took.Round(time.Millisecond))
		if err != nil {
			level, msg = "warn", fmt.Sprintf("%s of %s failed after %s: %v", kind, vm, took.Round(time.Millisecond), err)
		}
		r.evs[i].record(context.Background(), level, kind, msg, map[string]any{"seconds": took.Seconds()})
	}, r.pace.background)
}

// read is step 4 for one VM: its read from the storage snapshot, bounded
// by the VM timeout, its progress recorded; its session is closed after.
func (r *batchRun) read(ctx context.Context, h *held) (pt *repo.Point, err error) {
	vm := r.b.VMs[h.i]
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), backup.CloseTimeout)
		defer cancel()
		if _, cerr := h.Sess.Close(cctx, err == nil); cerr != nil {
			r.evs[h.i].record(ctx, "warn", "snapshot-remove", fmt.Sprintf("closing the VM session failed: %v", cerr), nil)
		}
	}()
	limit := r.p.Timeouts.VM
	if limit == 0 {
		limit = policy.DefaultVMTimeout
	}
	ctx, cancel := context.WithTimeoutCause(ctx, limit, fmt.Errorf("VM timeout exceeded (%s)", limit))
	defer cancel()
	req := attempt.Request(r.p, attempt.Spec{Connection: r.b.Connection, VM: h.VM.VMRef, Mode: vm.Mode, SnapshotMode: vm.SnapshotMode,
		JobID: r.b.Job, History: r.history, Now: time.Now()})
	// Throttled as a VM unit's read is (unitPace.backUpVM): by the
	// latency of the datastore this worker reads, and the per-task rate
	// or the read's part of the batch's share of the leader's rate.
	perTask := ratelimit.Min(r.cfg.Limits.TaskRate, readShare(r.b))
	ths := r.pace.watch.Join(latency.Unit{Control: r.cfg.LatencyControl, Connection: r.b.Connection, Policy: r.p.Name, VM: vm.VMName,
		Datastores: vm.Datastores, Shares: r.p.Shares.Value(), Ceiling: float64(max(perTask, 0)), Repository: r.w,
		Event: func(level, kind, msg string, fields map[string]any) { r.evs[h.i].record(ctx, level, kind, msg, fields) }})
	defer ths.Leave()
	prog := &backup.Progress{}
	opts := backup.Options{ChangeCheckSpans: r.p.ChangeCheck, Progress: prog, Limiter: ths.Limit(unitLimiter(perTask, r.b.Rate > 0)),
		Nice: ths.Nice(), Note: func(m string) { r.evs[h.i].record(ctx, "info", "data-path", vm.VMName+": "+m, nil) }}
	stop := r.pace.report(ctx, prog, r.evs[h.i])
	defer stop()
	return groupread.Read(ctx, r.w, &h.Held, req, opts)
}

// closeAll closes the held sessions of a batch that stops before its
// reads.
func (r *batchRun) closeAll(hs []*held) {
	ctx, cancel := context.WithTimeout(context.Background(), backup.CloseTimeout)
	defer cancel()
	for _, h := range hs {
		_, _ = h.Sess.Close(ctx, false) // the batch's error is the one to report
	}
}

// disksOn are the held VMs' disks on datastore ds, as their sessions
// list them.
func disksOn(hs []*held, ds string) []hypervisor.DiskInfo {
	var out []hypervisor.DiskInfo
	for _, h := range hs {
		for _, d := range h.Sess.Disks() {
			if d.Datastore == ds {
				out = append(out, d.DiskInfo)
			}
		}
	}
	return out
}

// allFailed is the outcome of a batch that could not start: every VM
// fails with err.
func allFailed(b queue.Batch, err error) queue.BatchDone {
	var out queue.BatchDone
	for _, vm := range b.VMs {
		out.VMs = append(out.VMs, queue.VMError(vm.Task, err, errors.Is(err, hypervisor.ErrTransient)))
	}
	return out
}

// readShare is what one read of batch b may read in bytes/s: the batch's
// share of the leader's rate split among its reads at once (0: unlimited).
func readShare(b queue.Batch) policy.ByteRate {
	if b.Rate <= 0 {
		return 0
	}
	return max(policy.ByteRate(b.Rate)/policy.ByteRate(max(b.Reads, 1)), 1)
}

// unitLimiter is a unit's limiter on a worker at perTask bytes/s: its
// bucket starts empty when it holds a share of the leader's rate
// (ratelimit.Shared), so that units starting at once on several workers
// do not each read a burst beyond their share.
func unitLimiter(perTask policy.ByteRate, shared bool) backup.RateLimiter {
	if shared {
		return ratelimit.Shared(nil, perTask)
	}
	return ratelimit.Task(nil, perTask)
}
