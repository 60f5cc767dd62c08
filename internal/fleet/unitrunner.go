package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coffer-backup/coffer/internal/catalog/postgres"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/fleet/queue"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
)

// UnitRunner is the leader's engine.UnitRunner for a fleet: an attempt
// placed on a worker is handed to that worker's queue as a VM unit
// (queue.VMUnit), and its point, committed by the worker, comes back in
// the unit's outcome (its manifest) so that the engine records it as one
// of its own. An
// attempt placed on no worker ("", the engine has none), or one that only
// this process can run (a group's read of a batch snapshot: handedOff),
// runs here.
type UnitRunner struct {
	Queue *queue.Client
	// Epoch is the worker's registration (Server.Runner: as the leader's
	// watch last saw it, no catalog read per unit): the unit carries it,
	// and the worker's fence refuses any other. Correctness does not
	// depend on its freshness: a unit handed off under an epoch stale by
	// then is fenced by the worker and retried (Epochs says why the
	// check after the outcome, stillCurrent, holds too).
	Epoch func(ctx context.Context, worker string) (int64, error)
	// Sessions records the units in flight and ends the write sessions of
	// a unit that comes back fenced before the engine retries it (nil:
	// none are ended, a retry stores the lost attempt's chunks again).
	Sessions *Sessions
	// LeaderEpoch is the epoch of the schedules lease this server holds
	// (0: none): the unit carries it, and the worker refuses it once
	// another server took the lease over.
	LeaderEpoch func() int64
	// Progress feeds the attempts' progress from what their workers
	// record (nil: a unit counts in its job's progress when it ends).
	Progress *UnitProgress
	// RecordGrants: the task's start is written in the grant's
	// transaction (postgres.StartTaskTx, with River's insert), and the
	// engine leaves it to this runner (engine.StartRecorder). The
	// leader's runner on PostgreSQL, where the catalog and River share
	// the database.
	RecordGrants bool
}

var (
	_ engine.UnitRunner    = (*UnitRunner)(nil)
	_ engine.StartRecorder = (*UnitRunner)(nil)
)

// RecordsStart implements engine.StartRecorder: a unit handed off under a
// catalog task has its start recorded with its grant.
func (r *UnitRunner) RecordsStart(p engine.Placement) bool {
	return r.RecordGrants && handedOff(p) && p.JobID != 0 && p.TaskID != 0
}

// grantRecord is the catalog's part of p's grant, written in the
// transaction of its River job (nil: none).
func (r *UnitRunner) grantRecord(p engine.Placement) queue.GrantTx {
	if !r.RecordsStart(p) {
		return nil
	}
	return func(ctx context.Context, tx pgx.Tx) error {
		return postgres.StartTaskTx(ctx, tx, p.JobID, p.TaskID, p.Attempt, p.Started)
	}
}

// cancelGrace bounds the cancel of an abandoned unit: the attempt returns
// at once, the cancel reaches River in the background.
const cancelGrace = 10 * time.Second

// RunAttempt implements engine.UnitRunner.
func (r *UnitRunner) RunAttempt(ctx context.Context, p engine.Placement, local func(context.Context) (*repo.Point, error)) (*repo.Point, error) {
	if !handedOff(p) {
		return local(ctx)
	}
	epoch, err := r.Epoch(ctx, p.Worker)
	if err != nil {
		return nil, fmt.Errorf("%w: worker %s: %w", hypervisor.ErrTransient, p.Worker, err)
	}
	// Held from before the hand-off: a worker lost at any point after it
	// has this unit's sessions ended.
	defer r.Sessions.hold(p.Worker, epoch, p.Repository)()
	defer r.Progress.watch(p.JobID, p.TaskID, p.Progress)()
	var leaderEpoch int64
	if r.LeaderEpoch != nil {
		leaderEpoch = r.LeaderEpoch()
	}
	sub, err := r.Queue.SubmitVMUnitRecorded(ctx, queue.VMUnit{Policy: p.Policy, Repository: p.Repository, Connection: p.Connection,
		VMID: p.VMID, VMName: p.VM, Mode: p.Mode, SnapshotMode: p.SnapshotMode, Worker: p.Worker, Epoch: epoch,
		LeaderEpoch: leaderEpoch, Pools: p.Pools, Rate: int64(p.Rate), Job: p.JobID, Task: p.TaskID, Attempt: p.Attempt, Host: p.Host, Datastores: p.Datastores,
		One: oneOf(p)}, r.grantRecord(p))
	if err != nil {
		return nil, err
	}
	out, err := r.Queue.WaitSubmitted(ctx, sub)
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
		if out.Fenced {
			// Before the engine retries: the retry deduplicates against
			// what the fenced attempt stored.
			r.Sessions.endUnit(ctx, p.Worker, epoch, p.Repository)
		}
		return nil, err
	}
	var done queue.UnitDone
	if err := json.Unmarshal(out.Document, &done); err != nil {
		return nil, fmt.Errorf("worker %s's outcome: %w", out.Worker, err)
	}
	if done.Recorded {
		// The worker's completion committed the point and the task's end,
		// fenced by its epoch then: they are current, whatever became of
		// the worker since, and the engine records them no more.
		if p.Committed != nil {
			p.Committed()
		}
		return point(ctx, p, out.Worker, done)
	}
	if err := r.stillCurrent(ctx, p.Worker, epoch); err != nil {
		return nil, err
	}
	return point(ctx, p, out.Worker, done)
}

// stillCurrent checks, before the point of a unit is recorded, that the
// worker that ran it is still registered at the epoch it ran under: a
// worker declared lost (its unit re-admitted elsewhere) or replaced may
// have committed a point to the repository, but it is never made current
// in the catalog. The unit counts as fenced, and is retried.
func (r *UnitRunner) stillCurrent(ctx context.Context, worker string, epoch int64) error {
	now, err := r.Epoch(ctx, worker)
	if err == nil && now != epoch {
		err = fmt.Errorf("it registered again (epoch %d)", now)
	}
	if err != nil {
		return fmt.Errorf("%w: fenced: the unit ran on worker %s at epoch %d, which is no longer current: %w",
			hypervisor.ErrTransient, worker, epoch, err)
	}
	return nil
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

// point is the point the worker committed: from the manifest its
// outcome carries (the body the repository seals, so the engine records
// the same point as from the repository, without opening it per unit),
// or, from a worker that sends none, loaded from the job's repository.
func point(ctx context.Context, p engine.Placement, worker string, done queue.UnitDone) (*repo.Point, error) {
	if len(done.Manifest) > 0 {
		return manifestPoint(done)
	}
	if p.LoadPoint == nil {
		return nil, fmt.Errorf("worker %s committed point %s, which this engine cannot read (no repository)", worker, done.Point)
	}
	pt, err := p.LoadPoint(ctx, done.Point)
	if err != nil {
		return nil, fmt.Errorf("the point %s worker %s committed: %w", done.Point, worker, err)
	}
	return pt, nil
}

// manifestPoint decodes the manifest of an outcome as the repository
// decodes a manifest's body (repo's decodeSnapshot).
func manifestPoint(done queue.UnitDone) (*repo.Point, error) {
	x, err := id.Parse(done.Point)
	if err != nil {
		return nil, fmt.Errorf("the point %q of a worker's outcome: %w", done.Point, err)
	}
	pt := &repo.Point{}
	if err := json.Unmarshal(done.Manifest, pt); err != nil {
		return nil, fmt.Errorf("the manifest of point %s in a worker's outcome: %w", x.Short(), err)
	}
	pt.ID = x
	return pt, nil
}
