package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/riverqueue/river"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/service"
)

// BatchKind is the River job kind of a group: datastore batch handed to
// a worker that mounts the datastore: the VMs' snapshots, the
// datastore's storage snapshot, the VM snapshots' release, then each
// VM's read from the storage snapshot, all in the worker's process
// (which alone holds the storage snapshot), each VM its own task and
// point.
const BatchKind = "coffer_batch"

// Batch is a batch as the leader's dispatcher granted it. Like a VMUnit
// it names things, never a secret: the worker builds every VM's attempt
// from its own configuration in effect.
type Batch struct {
	Policy     string `json:"policy"`
	Repository string `json:"repository"`
	Connection string `json:"connection"`
	Datastore  string `json:"datastore"`
	// Reads is how many VMs the worker reads from the storage snapshot
	// at once (the repository's streams the batch holds).
	Reads       int    `json:"reads"`
	Worker      string `json:"worker"`
	Epoch       int64  `json:"epoch"`
	LeaderEpoch int64  `json:"leader_epoch"`
	Protocol    int    `json:"protocol"`
	// Pools are the keys of the pools the grant occupies (VMUnit.Pools).
	Pools []string `json:"pools"`
	// Rate is the most bytes/s the batch's reads may read together
	// (engine.BatchPlacement.Rate; 0: unlimited).
	Rate int64 `json:"rate,omitempty"`
	// Job and VMs (their tasks and attempts) make a batch unique: a
	// replayed grant is a no-op.
	Job int64     `json:"job" river:"unique"`
	VMs []BatchVM `json:"vms" river:"unique"`
	// EndKey is the key the job's end notice carries its outcome under
	// (Args.EndKey).
	EndKey string `json:"end_key,omitempty"`
}

// BatchVM is one VM of a batch: its task and attempt, and what the
// dispatcher decided for it.
type BatchVM struct {
	Task         int64    `json:"task"`
	Attempt      int      `json:"attempt"`
	VMID         string   `json:"vm_id"`
	VMName       string   `json:"vm_name"`
	Host         string   `json:"host,omitempty"`
	Datastores   []string `json:"datastores,omitempty"`
	Mode         string   `json:"mode"`
	SnapshotMode string   `json:"snapshot_mode"`
}

// Kind implements river.JobArgs.
func (Batch) Kind() string { return BatchKind }

// Unit is the batch's VM vm as a VM unit: what a worker's events and
// fences of that VM are written under.
func (b Batch) Unit(vm BatchVM) VMUnit {
	return VMUnit{Policy: b.Policy, Repository: b.Repository, Connection: b.Connection, VMID: vm.VMID, VMName: vm.VMName,
		Host: vm.Host, Datastores: vm.Datastores, Mode: vm.Mode, SnapshotMode: vm.SnapshotMode, Worker: b.Worker, Epoch: b.Epoch,
		Protocol: b.Protocol, LeaderEpoch: b.LeaderEpoch, Job: b.Job, Task: vm.Task, Attempt: vm.Attempt}
}

// Held is the batch as a leader taking the schedules over holds it
// (UnfinishedVMUnits): one unit of its pools, on its worker, for no VM
// in particular.
func (b Batch) Held() VMUnit {
	return VMUnit{Policy: b.Policy, Repository: b.Repository, Connection: b.Connection, VMName: "the batch of datastore " + b.Datastore,
		Worker: b.Worker, Epoch: b.Epoch, Protocol: b.Protocol, LeaderEpoch: b.LeaderEpoch, Pools: b.Pools, Job: b.Job}
}

// BatchDone is a batch's outcome document: an outcome per VM, recorded
// by the worker, in the batch's order.
type BatchDone struct {
	VMs []BatchVMDone `json:"vms"`
}

// BatchVMDone is one VM's outcome: the point it committed (as UnitDone),
// or its error.
type BatchVMDone struct {
	Task int64 `json:"task"`
	UnitDone
	ErrorClass string `json:"error_class,omitempty"`
	Error      string `json:"error,omitempty"`
	// Transient: worth another attempt (hypervisor.ErrTransient).
	Transient bool `json:"transient,omitempty"`
	// Fallback: the datastore cannot be snapshotted and the policy backs
	// its VMs up one by one instead (storage-fallback: vm); the attempt
	// does not count.
	Fallback bool `json:"fallback,omitempty"`
}

// BatchFunc runs a batch on a worker. internal/fleet provides it
// (RunBatch).
type BatchFunc func(ctx context.Context, b Batch) BatchDone

// SubmitBatch hands a batch to its worker's queue, in a transaction of
// its own.
func (c *Client) SubmitBatch(ctx context.Context, b Batch) (Submitted, error) {
	b.Protocol, b.EndKey = ProtocolVersion, newEndKey()
	return c.submitGrant(ctx, b.Worker, b, b.EndKey, "the batch of datastore "+b.Datastore, nil)
}

// batchWorker runs coffer_batch jobs on a worker, fenced and completed as
// VM units are (vmUnitWorker).
type batchWorker struct {
	river.WorkerDefaults[Batch]
	units *vmUnitWorker
	run   BatchFunc
}

// Work runs the batch unless it is fenced, and completes the job itself
// with the outcome.
func (w *batchWorker) Work(ctx context.Context, job *river.Job[Batch]) error {
	out := w.outcome(ctx, job.Args)
	if err := river.RecordOutput(ctx, out); err != nil {
		return err
	}
	return w.units.ops.completeJob(ctx, job.Args.EndKey, completeTx(job))
}

func (w *batchWorker) outcome(ctx context.Context, b Batch) (out *Outcome) {
	ops := w.units.ops
	out = &Outcome{Worker: ops.name}
	defer func() {
		if r := recover(); r != nil {
			ops.log.Error("batch panicked", "datastore", b.Datastore, "panic", r, "stack", string(debug.Stack()))
			out.ErrorClass, out.Error, out.Document = string(api.Internal), fmt.Sprintf("the batch of %s panicked: %v", b.Datastore, r), nil
		}
	}()
	if b.Protocol != ProtocolVersion {
		out.ErrorClass, out.Error = string(api.UnsupportedVersion), fmt.Sprintf("the batch speaks protocol %d, this worker %d", b.Protocol, ProtocolVersion)
		return out
	}
	if err := ops.fencedFor(ctx, b.Worker, b.Epoch); err != nil {
		ops.log.Info("fenced batch completes without running", "datastore", b.Datastore, "worker", b.Worker, "epoch", b.Epoch, "err", err)
		out.Fenced, out.Error = true, err.Error()
		return out
	}
	if err := w.units.leaderFenced(ctx, b.LeaderEpoch); err != nil {
		ops.log.Info("fenced batch of a stale leader completes without running", "datastore", b.Datastore, "job", b.Job,
			"leader_epoch", b.LeaderEpoch, "err", err)
		out.Fenced, out.Error = true, err.Error()
		return out
	}
	if w.run == nil {
		out.ErrorClass, out.Error = string(api.Internal), "this worker runs no batches"
		return out
	}
	attrs := []any{"job", b.Job, "worker", b.Worker, "connection", b.Connection, "datastore", b.Datastore, "vms", len(b.VMs)}
	ops.log.Info("batch starts", append(attrs, "leader_epoch", b.LeaderEpoch)...)
	start := time.Now()
	done := w.run(ctx, b)
	if ctx.Err() != nil {
		// Ended (fenced, cancelled) while it finished: no VM reports
		// success (vmUnitWorker.outcome says why). A worker that fenced
		// itself (it could not renew in time: a loaded host, a cut) says
		// so, and the leader runs the batch again; its own loss may be
		// declared only later, or never (it renewed after all).
		out.ErrorClass, out.Error = string(api.Cancelled), fmt.Sprintf("the batch of %s ended after its context: %v", b.Datastore, context.Cause(ctx))
		if err := ops.fencedFor(context.WithoutCancel(ctx), b.Worker, b.Epoch); err != nil {
			out.ErrorClass, out.Fenced, out.Error = "", true, fmt.Sprintf("the batch of %s ended as its worker fenced itself: %v", b.Datastore, err)
		}
		ops.log.Info("batch ends", append(attrs, "seconds", time.Since(start).Seconds(), "err", out.Error)...)
		return out
	}
	failed := 0
	for _, vm := range done.VMs {
		if vm.Error != "" {
			failed++
		}
	}
	ops.log.Info("batch ends", append(attrs, "seconds", time.Since(start).Seconds(), "failed", failed)...)
	out.Document, _ = json.Marshal(done) // strings and documents already marshalled always marshal
	return out
}

// classOf is an error's class for a VM's outcome.
func classOf(err error) string { return string(service.Classify(err)) }

// VMError is a VM's outcome for err: its class and message, and whether
// it is worth another attempt.
func VMError(task int64, err error, transient bool) BatchVMDone {
	return BatchVMDone{Task: task, ErrorClass: classOf(err), Error: err.Error(), Transient: transient}
}
