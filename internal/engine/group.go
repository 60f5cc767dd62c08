package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine/groupread"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
)

// Storage-level (group) protection, policy `group: datastore`:
//
//  1. a batch unit takes the hypervisor-side slots of up to as many VMs of
//     one datastore as the limits allow at once, and snapshots them all
//     concurrently;
//  2. it takes one storage snapshot of the datastore
//     (hypervisor.StorageSnapshotter);
//  3. it releases every VM snapshot at once and gives its slots back: the
//     VMs carried snapshots only for the seconds of steps 1-3;
//  4. each VM is then read from the storage snapshot by its own unit,
//     which needs a repository stream and its resource groups but no
//     host or datastore slot; the storage snapshot is deleted when the
//     last VM of the batch is done.
//
// VMs whose disks span several datastores are backed up VM by VM (with a
// warning event). A policy on a connection without a StorageSnapshotter is
// refused by Engine.Start, never quietly run VM by VM. A VM whose group
// snapshot fails transiently, or whose read fails, is retried VM by VM.

// groupUnits splits the tasks into per-datastore batches.
func (j *Job) groupUnits() []*unit {
	groups := map[string][]*task{}
	var keys []string
	var units []*unit
	for _, t := range j.tasks {
		// Every connection has a provider (Start refuses the policy
		// otherwise); a VM on several datastores cannot be read from one
		// datastore's snapshot.
		if len(t.vm.Datastores) != 1 {
			t.event("warn", "group", fmt.Sprintf("%s backed up VM by VM: its disks span several datastores", t.vm.Name), nil)
			units = append(units, j.vmUnit(t))
			continue
		}
		k := t.rec.Connection + "\x00" + t.vm.Datastores[0]
		if groups[k] == nil {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], t)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ts := groups[k]
		sort.SliceStable(ts, func(a, b int) bool { return ts[a].size > ts[b].size })
		for _, b := range j.batches(ts) {
			units = append(units, j.batchUnit(b))
		}
	}
	return units
}

// batches cuts tasks into groups whose combined hypervisor-side needs fit
// every limit at once, so each batch can be snapshotted in one go.
func (j *Job) batches(ts []*task) [][]*task {
	var out [][]*task
	var cur []*task
	count := map[*resource]int{}
	for _, t := range ts {
		rs := needsOf(j.needs(t, true, false)...)
		fit := true
		for _, n := range rs {
			if count[n.r]+n.n > n.r.cap {
				fit = false
			}
		}
		if !fit && len(cur) > 0 {
			out, cur, count = append(out, cur), nil, map[*resource]int{}
		}
		cur = append(cur, t)
		for _, n := range rs {
			count[n.r] += n.n
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func (j *Job) batchUnit(batch []*task) *unit {
	reads, rs := j.batchReads(batch)
	var size int64
	for _, t := range batch {
		rs = append(rs, j.needs(t, true, false)...)
		size += t.size
	}
	u := &unit{owner: j, needs: needsOf(rs...), size: size, route: j.batchRoute(batch)}
	u.onWait = func(why string) {
		j.event("warn", "no-worker", fmt.Sprintf("a batch of %d VMs on datastore %s waits: %s", len(batch), batch[0].vm.Datastores[0], why),
			map[string]any{"reason": why, "datastore": batch[0].vm.Datastores[0]})
	}
	u.run = func(u *unit) { j.runBatch(u, batch, reads) }
	u.drop = func() {
		for _, t := range batch {
			t.finish(catalog.StatusCancelled, "cancelled before it started")
		}
	}
	return u
}

// runBatch performs steps 1-3 and queues step 4, or hands the whole
// batch to the worker it was placed on (onWorker).
func (j *Job) runBatch(u *unit, batch []*task, reads int) {
	batch, ended := j.batchBefore(u, batch, reads)
	if ended {
		return
	}
	ds := batch[0].vm.Datastores[0]
	conn := batch[0].rec.Connection
	if j.s.storage[conn] == nil {
		// A workers' connection (WorkerBatches) in an engine given no
		// workers: its batches run on its workers only.
		j.e.disp.done(u)
		for _, t := range batch {
			t.finish(catalog.StatusFailed, fmt.Sprintf("connection %s's batches run on the workers that reach it, and this server has given its engine none", conn))
		}
		return
	}
	start := time.Now()
	held := j.snapshotBatch(batch)
	var ss hypervisor.StorageSnapshot
	var fallback []*unit
	if len(held) > 0 {
		label := groupread.Label(j.record.ID, ds, start)
		var err error
		var disks []hypervisor.DiskInfo
		for _, t := range held {
			for _, d := range t.vm.Disks {
				if d.Datastore == ds {
					disks = append(disks, d)
				}
			}
		}
		ss, err = j.s.storage[conn].SnapshotDatastore(j.ctx, ds, label, disks)
		switch {
		case err != nil && errors.Is(err, hypervisor.ErrStorageUnsupported) && j.p.StorageFallback == "vm":
			j.event("warn", "storage-fallback", fmt.Sprintf("storage snapshot of %s not possible, so its %d VMs are backed up one by one (storage-fallback: vm): %v",
				ds, len(held), err), map[string]any{"datastore": ds})
			for _, t := range held {
				t.closeHeld(false) // resumes a held VM
				t.attempt--        // the group attempt does not count
				t.setStatus(catalog.StatusQueued)
				fallback = append(fallback, j.vmUnit(t))
			}
			held = nil
		case err != nil:
			j.event("error", "storage-snapshot", fmt.Sprintf("storage snapshot of %s failed: %v", ds, err), map[string]any{"datastore": ds})
			for _, t := range held {
				t.closeHeld(false)
				t.failOrRetry(fmt.Errorf("storage snapshot of %s: %w", ds, err))
			}
			held = nil
		}
	}
	// Release every VM snapshot at once.
	var wg sync.WaitGroup
	for _, t := range held {
		wg.Go(func() {
			if err := t.held.Sess.Release(j.ctx); err != nil {
				t.event("warn", "snapshot-release", fmt.Sprintf("releasing the VM snapshot early failed (it is removed at the end): %v", err), nil)
			}
		})
	}
	wg.Wait()
	window := time.Since(start)
	j.e.disp.done(u)
	if len(fallback) > 0 {
		j.resubmit(fallback...)
	}
	if len(held) == 0 {
		return
	}
	j.event("info", "group-snapshot", fmt.Sprintf("datastore %s: %d VMs snapshotted, storage snapshot taken and VM snapshots released in %s",
		ds, len(held), window.Round(time.Millisecond)), map[string]any{"datastore": ds, "vms": len(held), "seconds": window.Seconds()})
	refs := &storageRef{ss: ss, left: int32(len(held)), onDelete: func(err error) {
		j.event("info", "storage-snapshot-deleted", fmt.Sprintf("storage snapshot of %s deleted (err: %v)", ds, err), map[string]any{"datastore": ds})
	}}
	if n := j.p.KeepStorageSnapshots; n > 0 {
		refs.keep = j.keepStorage(conn, ds, held, n)
	}
	var readUnits []*unit
	for _, t := range held {
		t.held.Storage, t.held.refs = ss, refs
		readUnits = append(readUnits, j.vmUnit(t))
	}
	j.resubmit(readUnits...)
}

// batchBefore ends what runBatch need not do here: a cancelled job's
// batch, one whose VMs all took their resumed run's points
// (settleBatch), one handed to a worker (onWorker). Otherwise it returns
// the VMs to snapshot in this process.
func (j *Job) batchBefore(u *unit, batch []*task, reads int) (rest []*task, ended bool) {
	if j.ctx.Err() != nil {
		j.e.disp.done(u)
		u.drop()
		return nil, true
	}
	if batch = j.settleBatch(batch); len(batch) == 0 {
		j.e.disp.done(u)
		return nil, true
	}
	return batch, j.onWorker(u, batch, reads)
}

// snapshotBatch snapshots every VM of a batch concurrently and returns the
// tasks that now hold a session; the others are failed or requeued.
func (j *Job) snapshotBatch(batch []*task) []*task {
	var mu sync.Mutex
	var held []*task
	var wg sync.WaitGroup
	for _, t := range batch {
		j.mu.Lock()
		t.attempt++
		t.rec.Attempts, t.rec.Status = t.attempt, catalog.StatusRunning
		if t.rec.StartedAt.IsZero() {
			t.rec.StartedAt = time.Now()
		}
		rec := t.rec
		j.mu.Unlock()
		j.rec.task(rec)
		wg.Go(func() {
			plan := backup.PlanVM(j.history, repo.Source{Kind: t.conn.Kind(), Connection: t.rec.Connection, VMID: t.vm.ID, VMName: t.vm.Name}, t.rec.Mode)
			to := j.p.Timeouts
			req := plan.SnapshotRequest(hypervisor.SnapshotRequest{SessionID: fmt.Sprintf("job%d-task%d-%d", j.record.ID, t.rec.ID, t.attempt),
				Mode: hypervisor.SnapshotMode(t.rec.SnapshotMode), Quiesce: hypervisor.QuiescePolicy(j.p.Quiesce),
				Chain: j.chain(), Hold: true,
				Timeouts: hypervisor.Timeouts{SnapshotCreate: to.SnapshotCreate, SnapshotRemove: to.SnapshotRemove, Quiesce: to.Quiesce, Setup: to.Setup}})
			sess, err := t.guard().Snapshot(j.ctx, t.vm.VMRef, req)
			if err != nil {
				t.failOrRetry(fmt.Errorf("snapshot %s: %w", t.vm.Name, err))
				return
			}
			t.held = &heldSnapshot{Held: groupread.Held{VM: t.vm, Sess: sess, Plan: plan}}
			mu.Lock()
			held = append(held, t)
			mu.Unlock()
		})
	}
	wg.Wait()
	return held
}

// failOrRetry ends a task whose group phase failed: transient errors are
// retried VM by VM after a backoff.
func (t *task) failOrRetry(err error) {
	j := t.j
	rt := j.p.Retries.WithDefaults()
	switch {
	case j.ctx.Err() != nil:
		t.finish(catalog.StatusCancelled, fmt.Sprintf("cancelled while running: %v", err))
	case retryable(err) && t.attempt < rt.Attempts:
		d := backoff(rt, t.attempt)
		t.event("warn", "retry", fmt.Sprintf("attempt %d of %d failed: %v; retrying VM by VM in %s", t.attempt, rt.Attempts, err, d.Round(time.Millisecond)), nil)
		t.setStatus(catalog.StatusQueued)
		go func() {
			wait(j.ctx, d)
			j.resubmit(j.vmUnit(t))
		}()
	default:
		t.finish(catalog.StatusFailed, err.Error())
	}
}

// storageRef deletes a storage snapshot when its last VM is done, or
// keeps it as a restore point (keep).
type storageRef struct {
	ss       hypervisor.StorageSnapshot
	left     int32
	onDelete func(error)
	// keep, when set, keeps the snapshot instead; it reports whether it
	// did (a provider that cannot keep has it deleted).
	keep func(context.Context, hypervisor.StorageSnapshot) bool
}

func (r *storageRef) release() {
	if atomic.AddInt32(&r.left, -1) == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), backup.CloseTimeout)
		defer cancel()
		if r.keep != nil && r.keep(ctx, r.ss) {
			return
		}
		r.onDelete(r.ss.Delete(ctx))
	}
}

// heldSnapshot is a VM of a batch between its snapshot and its read
// (groupread.Held), with its reference on the batch's storage snapshot.
type heldSnapshot struct {
	groupread.Held
	refs *storageRef
}

// readHeld backs up a VM of a batch as its batch planned it
// (groupread.Read).
func (t *task) readHeld(ctx context.Context, req backup.VMRequest, o backup.Options) (*repo.Point, error) {
	return groupread.Read(ctx, t.j.w, &t.held.Held, req, o)
}

// closeHeld closes the held session (idempotent) and drops the task's
// reference on the storage snapshot.
func (t *task) closeHeld(ok bool) {
	h := t.held
	if h == nil {
		return
	}
	t.held = nil
	ctx, cancel := context.WithTimeout(context.Background(), backup.CloseTimeout)
	defer cancel()
	if _, err := h.Sess.Close(ctx, ok); err != nil {
		t.event("warn", "snapshot-remove", fmt.Sprintf("closing the VM session failed: %v", err), nil)
	}
	if h.refs != nil {
		h.refs.release()
	}
}

// keepStorage returns the storageRef.keep of a batch whose policy keeps
// storage snapshots: the snapshot becomes a restore point of the policy
// holding the batch's VMs (their disks on ds), and the policy's older
// ones on ds beyond the newest n are deleted.
func (j *Job) keepStorage(conn, ds string, held []*task, n int) func(context.Context, hypervisor.StorageSnapshot) bool {
	k := hypervisor.KeptSnapshot{Policy: j.p.Name, Connection: conn, JobID: j.record.ID, SnapshotMode: cmp.Or(j.p.Snapshot, string(hypervisor.CrashConsistent))}
	for _, t := range held {
		v := hypervisor.KeptVM{VMRef: t.vm.VMRef}
		for _, d := range t.vm.Disks {
			if d.Datastore == ds {
				v.Disks = append(v.Disks, d)
			}
		}
		k.VMs = append(k.VMs, v)
	}
	return func(ctx context.Context, ss hypervisor.StorageSnapshot) bool {
		keeper, ok := ss.(hypervisor.StorageKeeper)
		if !ok {
			j.event("warn", "storage-snapshot-kept", fmt.Sprintf("the storage snapshot of %s cannot be kept (its provider keeps none): deleted", ds), map[string]any{"datastore": ds})
			return false
		}
		if err := keeper.Keep(ctx, k); err != nil {
			j.event("warn", "storage-snapshot-kept", fmt.Sprintf("keeping the storage snapshot of %s failed, so it is deleted: %v", ds, err), map[string]any{"datastore": ds})
			return false
		}
		pruned, err := keeper.PruneKept(ctx, n)
		if err != nil {
			j.event("warn", "storage-snapshot-kept", fmt.Sprintf("storage snapshot of %s kept, but deleting older ones failed (retried after the next run): %v", ds, err), map[string]any{"datastore": ds, "deleted": pruned})
			return true
		}
		j.event("info", "storage-snapshot-kept", fmt.Sprintf("storage snapshot of %s kept as a restore point (%d VMs; the newest %d are kept, %d older deleted)", ds, len(k.VMs), n, len(pruned)),
			map[string]any{"datastore": ds, "vms": len(k.VMs), "deleted": pruned})
		return true
	}
}
