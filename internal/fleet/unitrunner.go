package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/fleet/queue"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
)

// UnitRunner is the leader's engine.UnitRunner for a fleet: an attempt
// placed on a worker is handed to that worker's queue as a VM unit
// (queue.VMUnit), and its point, committed by the worker, is loaded from
// the job's repository (Placement.LoadPoint) so that the engine records
// it as one of its own. An
// attempt placed on no worker ("", the engine has none), or one that only
// this process can run (Placement.Policy ""), runs here.
type UnitRunner struct {
	Queue *queue.Client
	// Epoch is the worker's registration now (the registry's): the unit
	// carries it, and the worker's fence refuses any other.
	Epoch func(ctx context.Context, worker string) (int64, error)
}

var _ engine.UnitRunner = (*UnitRunner)(nil)

// cancelGrace bounds the cancel of an abandoned unit: the attempt returns
// at once, the cancel reaches River in the background.
const cancelGrace = 10 * time.Second

// RunAttempt implements engine.UnitRunner.
func (r *UnitRunner) RunAttempt(ctx context.Context, p engine.Placement, local func(context.Context) (*repo.Point, error)) (*repo.Point, error) {
	if p.Worker == "" || p.Policy == "" {
		return local(ctx)
	}
	epoch, err := r.Epoch(ctx, p.Worker)
	if err != nil {
		return nil, fmt.Errorf("%w: worker %s: %w", hypervisor.ErrTransient, p.Worker, err)
	}
	sub, err := r.Queue.SubmitVMUnit(ctx, queue.VMUnit{Policy: p.Policy, Repository: p.Repository, Connection: p.Connection,
		VMID: p.VMID, VMName: p.VM, Mode: p.Mode, SnapshotMode: p.SnapshotMode, Worker: p.Worker, Epoch: epoch,
		Job: p.JobID, Task: p.TaskID, Attempt: p.Attempt, Host: p.Host, Datastores: p.Datastores})
	if err != nil {
		return nil, err
	}
	out, err := r.Queue.Wait(ctx, sub.ID)
	if err != nil {
		if ctx.Err() != nil {
			// A lost worker or a cancelled job: the engine goes on at
			// once (retry elsewhere, or cancel); the worker, if alive,
			// stops within moments.
			go func() {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelGrace)
				defer cancel()
				_ = r.Queue.Cancel(cctx, sub.ID)
			}()
			return nil, context.Cause(ctx)
		}
		return nil, err
	}
	if err := outcomeErr(out); err != nil {
		return nil, err
	}
	return point(ctx, p, out)
}

// outcomeErr is a unit's error as the engine judges it: a transient one
// (or a fenced unit, whose worker was replaced) is retried.
func outcomeErr(out *queue.Outcome) error {
	err := out.Err()
	if err != nil && (out.Transient || out.Fenced) {
		return fmt.Errorf("%w: %w", hypervisor.ErrTransient, err)
	}
	return err
}

// point loads the point the worker committed.
func point(ctx context.Context, p engine.Placement, out *queue.Outcome) (*repo.Point, error) {
	var done queue.UnitDone
	if err := json.Unmarshal(out.Document, &done); err != nil {
		return nil, fmt.Errorf("worker %s's outcome: %w", out.Worker, err)
	}
	if p.LoadPoint == nil {
		return nil, fmt.Errorf("worker %s committed point %s, which this engine cannot read (no repository)", out.Worker, done.Point)
	}
	pt, err := p.LoadPoint(ctx, done.Point)
	if err != nil {
		return nil, fmt.Errorf("the point %s worker %s committed: %w", done.Point, out.Worker, err)
	}
	return pt, nil
}
