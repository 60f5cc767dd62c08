package fleet

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/fleet/queue"
	"github.com/coffer-backup/coffer/internal/hypervisor"
)

var _ engine.BatchRunner = (*UnitRunner)(nil)

// RunBatch implements engine.BatchRunner: a group: datastore batch placed
// on a worker is handed to that worker's queue whole (queue.Batch), with
// each VM's task and attempt, the worker's epoch and the leader's; the
// worker records an outcome per VM (queue.BatchDone), from which each VM
// ends as its own task with its own point. Fenced as a VM unit is: a
// batch the worker fenced, or that ran under an epoch no longer current,
// fails whole (transient), and its write sessions are ended before the
// engine runs it again, so the retry reuses what it stored.
func (r *UnitRunner) RunBatch(ctx context.Context, b engine.BatchPlacement) ([]engine.BatchOutcome, error) {
	epoch, err := r.Epoch(ctx, b.Worker)
	if err != nil {
		return nil, fmt.Errorf("%w: worker %s: %w", hypervisor.ErrTransient, b.Worker, err)
	}
	defer r.Sessions.hold(b.Worker, epoch, b.Repository)()
	var leaderEpoch int64
	if r.LeaderEpoch != nil {
		leaderEpoch = r.LeaderEpoch()
	}
	qb := queue.Batch{Policy: b.Policy, Repository: b.Repository, Connection: b.Connection, Datastore: b.Datastore, Reads: b.Reads,
		Worker: b.Worker, Epoch: epoch, LeaderEpoch: leaderEpoch, Pools: b.Pools, Rate: int64(b.Rate), Job: b.JobID}
	for _, p := range b.VMs {
		qb.VMs = append(qb.VMs, queue.BatchVM{Task: p.TaskID, Attempt: p.Attempt, VMID: p.VMID, VMName: p.VM, Host: p.Host,
			Datastores: p.Datastores, Mode: p.Mode, SnapshotMode: p.SnapshotMode})
	}
	sub, err := r.Queue.SubmitBatch(ctx, qb)
	if err != nil {
		return nil, err
	}
	out, err := r.Queue.WaitSubmitted(ctx, sub)
	if err != nil {
		if ctx.Err() != nil {
			r.cancelLater(ctx, sub.ID)
			return nil, context.Cause(ctx)
		}
		return nil, err
	}
	if err := outcomeErr(out); err != nil {
		if out.Fenced {
			r.Sessions.endUnit(ctx, b.Worker, epoch, b.Repository)
		}
		return nil, err
	}
	if err := r.stillCurrent(ctx, b.Worker, epoch); err != nil {
		return nil, err
	}
	var done queue.BatchDone
	if err := json.Unmarshal(out.Document, &done); err != nil {
		return nil, fmt.Errorf("worker %s's outcome of the batch of %s: %w", out.Worker, b.Datastore, err)
	}
	return batchOutcomes(ctx, b, out.Worker, done), nil
}

// cancelLater cancels an abandoned hand-off in the background (a lost
// worker, a cancelled job): the engine goes on at once.
func (r *UnitRunner) cancelLater(ctx context.Context, id int64) {
	go func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelGrace)
		defer cancel()
		_ = r.Queue.Cancel(cctx, id)
	}()
}

// batchOutcomes are the engine's outcomes of a batch's VMs: each VM's
// point from its manifest (point), or its error as the engine judges it.
func batchOutcomes(ctx context.Context, b engine.BatchPlacement, worker string, done queue.BatchDone) []engine.BatchOutcome {
	var outs []engine.BatchOutcome
	for _, vm := range done.VMs {
		o := engine.BatchOutcome{TaskID: vm.Task, Fallback: vm.Fallback}
		switch {
		case vm.Fallback:
		case vm.Error != "":
			o.Err = outcomeErr(&queue.Outcome{Worker: worker, ErrorClass: vm.ErrorClass, Error: vm.Error, Transient: vm.Transient})
		default:
			p := engine.Placement{LoadPoint: b.LoadPoint}
			o.Point, o.Err = point(ctx, p, worker, vm.UnitDone)
		}
		outs = append(outs, o)
	}
	return outs
}
