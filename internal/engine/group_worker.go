package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
)

// Batches on a fleet's workers. A batch is placed, like a VM's unit, on
// the least busy worker whose reach covers its route: its connection and
// datastore, and each VM's host where VMs are read on their host
// (batchRoute). There it runs whole, in the worker's process: the VMs'
// snapshots, the storage snapshot, their release and each VM's read from
// the storage snapshot, which only that process holds. So, unlike in
// this process, the batch keeps its slots (the VMs' hypervisor-side
// slots, one slot of its worker, and the repository streams it reads
// with) until its last VM is read. Each VM stays its own task, attempt
// and point, recorded here from the batch's outcome per VM. A VM whose
// read failed transiently is retried VM by VM, as in this process; a
// batch whose worker was lost or fenced runs again as a batch, on a
// worker that can run it (or on its return).

// BatchRunner is a UnitRunner that also hands a batch placed on a worker
// to that worker (internal/fleet), and returns an outcome per VM. An
// error is the whole batch's (it did not run, or its worker was lost):
// every VM of it is retried.
type BatchRunner interface {
	RunBatch(ctx context.Context, b BatchPlacement) ([]BatchOutcome, error)
}

// BatchPlacement is a batch the dispatcher started on a worker.
type BatchPlacement struct {
	Worker                                    string
	JobID                                     int64
	Policy, Repository, Connection, Datastore string
	// Reads is how many of its VMs the worker reads at once: the
	// repository streams the batch holds.
	Reads int
	// VMs are the batch's VMs, each with its task and attempt.
	VMs []Placement
	// Pools are the keys of the pools the batch occupies (Placement.Pools).
	Pools []string
	// Rate is the most bytes/s the batch's reads may read together
	// (Placement.Rate): each of its Reads at once reads at most
	// Rate/Reads.
	Rate policy.ByteRate
	// LoadPoint reads a point of the job's repository (Placement.LoadPoint).
	LoadPoint func(ctx context.Context, id string) (*repo.Point, error)
}

// BatchOutcome is one VM's outcome in a batch: its point, or its error.
type BatchOutcome struct {
	TaskID int64
	Point  *repo.Point
	Err    error
	// Fallback: its datastore could not be snapshotted and the policy
	// backs its VMs up one by one (storage-fallback: vm); the attempt
	// does not count.
	Fallback bool
}

// WorkerBatches is a connector whose group batches its workers take
// (a fleet's connection that only its workers open, internal/fleet): it
// needs no storage snapshot provider in this process.
type WorkerBatches interface {
	BatchesOnWorkers(ctx context.Context) (bool, error)
}

// refuseGroup refuses a group: datastore policy the engine cannot run as
// written: on a connection without a storage snapshot provider, here or
// on its workers, or keeping storage snapshots on a workers' connection
// (a worker keeps none yet) or on a vSphere one.
func refuseGroup(ctx context.Context, su *setup, p policy.Policy) error {
	if p.Group != "datastore" {
		return nil
	}
	for _, c := range p.ConnectionNames() {
		if conn := su.conns[c]; conn != nil && conn.Kind() == "vsphere" && p.KeepStorageSnapshots > 0 {
			// A kept snapshot is restored by copying its disk files onto
			// this host's datastore directories: QEMU's and libvirt's.
			return fmt.Errorf("policy %s: keep-storage-snapshots on vSphere connection %s: kept storage snapshots restore onto local datastore directories, "+
				"which a vSphere datastore is not; remove keep-storage-snapshots (its VMs are still read from one storage snapshot per run)", p.Name, c)
		}
		if wb, ok := su.conns[c].(WorkerBatches); ok {
			theirs, err := wb.BatchesOnWorkers(ctx)
			if err != nil {
				return fmt.Errorf("policy %s: %w", p.Name, err)
			}
			if theirs && p.KeepStorageSnapshots > 0 {
				return fmt.Errorf("policy %s: keep-storage-snapshots on connection %s, whose batches run on its workers, which keep no storage snapshot: "+
					"remove keep-storage-snapshots, or back the connection up from this server", p.Name, c)
			}
			if theirs {
				continue
			}
		}
		if su.storage[c] == nil {
			return fmt.Errorf("policy %s: group: datastore needs a storage snapshot provider, and connection %s has none: "+
				"remove `group: datastore` to back its VMs up one by one", p.Name, c)
		}
	}
	return nil
}

// batchReads are the repository streams a batch reads with on a worker,
// one per VM up to the repository's streams: the batch holds them from
// its start, as it keeps them to the end of its reads.
func (j *Job) batchReads(batch []*task) (int, []*resource) {
	if _, ok := j.e.o.UnitRunner.(BatchRunner); !ok {
		return 0, nil // batches run here: each read takes its own unit
	}
	streams := RepositoryStreams(j.s.cfg, j.s.limits, j.p.Repository)
	n := len(batch)
	if streams > 0 {
		n = min(n, streams)
	}
	r := j.e.disp.resource("repo:"+j.p.Repository, streams)
	rs := make([]*resource, n)
	for i := range rs {
		rs[i] = r
	}
	return n, rs
}

// onWorker runs the batch on the worker it was placed on, if it was
// placed on one and the runner hands batches off; it reports whether it
// did.
func (j *Job) onWorker(u *unit, batch []*task, reads int) bool {
	br, ok := j.e.o.UnitRunner.(BatchRunner)
	if !ok || u.worker == nil || j.one != nil {
		return false
	}
	start := time.Now()
	first := batch[0]
	bp := BatchPlacement{Worker: u.workerName(), JobID: j.record.ID, Policy: j.p.Name, Repository: j.p.Repository,
		Connection: first.rec.Connection, Datastore: first.vm.Datastores[0], Reads: reads, Pools: u.poolKeys(), Rate: j.rateShare(u), LoadPoint: j.loadPoint}
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
		bp.VMs = append(bp.VMs, Placement{Worker: bp.Worker, JobID: j.record.ID, TaskID: rec.ID, Attempt: rec.Attempts, Connection: rec.Connection,
			VM: rec.VMName, VMID: rec.VMID, Host: t.vm.Host, Datastores: t.vm.Datastores, Mode: rec.Mode, SnapshotMode: rec.SnapshotMode})
	}
	outs, err := br.RunBatch(u.ctx, bp)
	if err != nil && errors.Is(context.Cause(u.ctx), ErrWorkerLost) && j.ctx.Err() == nil {
		err = fmt.Errorf("%w (batch on worker %s abandoned: %v)", ErrWorkerLost, bp.Worker, err)
	}
	j.e.disp.done(u)
	if err != nil {
		j.retryBatch(batch, bp, err)
		return true
	}
	took := time.Since(start)
	byTask := map[int64]BatchOutcome{}
	for _, o := range outs {
		byTask[o.TaskID] = o
	}
	for _, t := range batch {
		o, ok := byTask[t.rec.ID]
		switch {
		case !ok:
			t.failOrRetry(fmt.Errorf("%w: worker %s's batch gave no outcome for %s", hypervisor.ErrTransient, bp.Worker, t.vm.Name))
		case o.Fallback:
			t.attempt-- // the group attempt does not count
			t.setStatus(catalog.StatusQueued)
			j.resubmit(j.vmUnit(t))
		case o.Err == nil:
			t.succeed(o.Point, took, false)
		default:
			t.failOrRetry(o.Err)
		}
	}
	return true
}

// retryBatch runs a batch that failed as a whole (its worker lost or
// fenced, its hand-off failed) again as a batch, after a backoff, with
// its VMs that have attempts left; the others fail.
func (j *Job) retryBatch(batch []*task, bp BatchPlacement, err error) {
	rt := j.p.Retries.WithDefaults()
	if j.ctx.Err() != nil || !retryable(err) {
		for _, t := range batch {
			t.failOrRetry(err)
		}
		return
	}
	var again []*task
	most := 0
	for _, t := range batch {
		if t.attempt < rt.Attempts {
			again = append(again, t)
			most = max(most, t.attempt)
			continue
		}
		t.finish(catalog.StatusFailed, err.Error())
	}
	if len(again) == 0 {
		return
	}
	d := backoff(rt, most)
	j.event("warn", "retry", fmt.Sprintf("the batch of %d VMs on datastore %s failed on worker %s: %v; %d of them run again as a batch in %s",
		len(batch), bp.Datastore, bp.Worker, err, len(again), d.Round(time.Millisecond)),
		map[string]any{"datastore": bp.Datastore, "worker": bp.Worker, "backoff_seconds": d.Seconds()})
	for _, t := range again {
		t.setStatus(catalog.StatusQueued)
	}
	go func() {
		wait(j.ctx, d)
		j.resubmit(j.batchUnit(again))
	}()
}
