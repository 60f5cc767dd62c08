package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/service"
)

// VMUnitKind is the River job kind of a VM's backup attempt handed to a
// worker: the dispatcher's unit itself, not an operation of the API (no
// operation backs up one VM of a policy's run under the run's job).
const VMUnitKind = "coffer_vm_unit"

// VMUnit is an attempt at one VM's backup under a policy (or of a backup
// of one VM: One), as the leader's dispatcher granted it. It names things, never a secret: the worker
// builds the attempt from its own configuration in effect (the policy,
// its connection and repository, with their credentials).
type VMUnit struct {
	Policy string `json:"policy"`
	// Repository is the policy's repository as the leader read it ("":
	// the default); the worker refuses to run when its own configuration
	// says another, rather than write a point where the leader will not
	// look for it.
	Repository string `json:"repository"`
	Connection string `json:"connection"`
	VMID       string `json:"vm_id"`
	VMName     string `json:"vm_name"`
	// Host and Datastores are where the VM is, as the leader counted its
	// limits: the worker logs them with the unit's start and end.
	Host       string   `json:"host,omitempty"`
	Datastores []string `json:"datastores,omitempty"`
	// Mode and SnapshotMode are what the dispatcher decided.
	Mode         string `json:"mode"`
	SnapshotMode string `json:"snapshot_mode"`
	Worker       string `json:"worker"`
	Epoch        int64  `json:"epoch"`
	Protocol     int    `json:"protocol"`
	// LeaderEpoch is the epoch of the schedules lease the granting
	// leader held: the worker runs the unit only while it is still the
	// lease's (LeaderFenceFunc), so a leader that froze and woke after
	// another took over has its late grants refused.
	LeaderEpoch int64 `json:"leader_epoch"`
	// Pools are the keys of the pools the grant occupies, a key once per
	// slot (engine.Placement.Pools): a leader taking over counts them as
	// occupied until the job finishes (engine.Hold).
	Pools []string `json:"pools"`
	// Rate is the most bytes/s the unit may read, its share of the
	// leader's limits.rate (engine.Placement.Rate; 0: unlimited).
	Rate int64 `json:"rate,omitempty"`
	// Job, Task and Attempt are the catalog's: a unit is unique by them,
	// so a replayed grant is a no-op (as a coffer_operation's).
	Job     int64 `json:"job" river:"unique"`
	Task    int64 `json:"task" river:"unique"`
	Attempt int   `json:"attempt" river:"unique"`
	// TaskStarted: the grant's transaction recorded the task's start
	// (SubmitVMUnitRecorded), so the worker records the task's end and
	// its point with the job's completion (UnitDone.Commit); else the
	// leader records them from the outcome.
	TaskStarted bool `json:"task_started,omitempty"`
	// One is set for a backup of one VM now (`coffer backup vm`, the
	// API's backup-vm), which is no policy's run: Policy is "", and the
	// worker builds the attempt from what the backup asked for.
	One *OneVM `json:"one,omitempty"`
	// EndKey is the key the job's end notice carries its outcome under
	// (Args.EndKey).
	EndKey string `json:"end_key,omitempty"`
}

// OneVM is what a backup of one VM asked for beside the unit's mode and
// snapshot mode (engine.VMBackup). Its hooks are named by their
// policies, taken from the worker's own configuration: a unit carries
// names, never a command.
type OneVM struct {
	// RepositoryName is the default repository's name as the leader
	// records it (service.RepoName); the worker refuses to run when its
	// own default is named otherwise.
	RepositoryName string `json:"repository_name"`
	// Chain is the backup chain the VM's change tracking belongs to.
	Chain   string            `json:"chain"`
	Quiesce string            `json:"quiesce"`
	Tags    map[string]string `json:"tags,omitempty"`
	// LockedUntil locks the point (object lock); zero: no lock.
	LockedUntil time.Time `json:"locked_until,omitzero"`
	// ChangeCheck is how many spans of each disk an incremental reads to
	// check change tracking (0: the default; -1: off).
	ChangeCheck int `json:"change_check,omitempty"`
	// HookPolicies name the policies whose hooks run around the snapshot.
	HookPolicies []string `json:"hook_policies,omitempty"`
}

// Kind implements river.JobArgs.
func (VMUnit) Kind() string { return VMUnitKind }

// VMUnitFunc runs a VM unit on a worker and returns the point it
// committed. internal/fleet provides it (RunVMUnit).
type VMUnitFunc func(ctx context.Context, u VMUnit) (UnitDone, error)

// UnitDone is a VM unit's outcome document: the point it committed.
type UnitDone struct {
	Point string `json:"point"`
	// Manifest is the point's manifest as committed (repo.Point's JSON,
	// the body the repository seals): the leader records the point from
	// it rather than reading the manifest back from the repository.
	// Absent from a worker of before it: the leader reads the repository.
	Manifest json.RawMessage `json:"manifest,omitempty"`
	// Recorded: the point and the task's end were committed in the
	// catalog with the job's completion (Commit), so the leader records
	// them no more.
	Recorded bool `json:"recorded,omitempty"`
	// Commit, if set, writes the point and the task's end within the
	// worker's completion transaction, fenced by the worker's epoch
	// (internal/fleet: postgres.EndWorkerUnitTx). An error rolls the whole
	// completion back: the job is then completed with that error instead,
	// fenced if it wraps catalog.ErrFenced, else transient (retried).
	Commit func(ctx context.Context, tx pgx.Tx) error `json:"-"`
}

// SubmitVMUnit hands a VM unit to its worker's queue, in a transaction of
// its own.
func (c *Client) SubmitVMUnit(ctx context.Context, u VMUnit) (Submitted, error) {
	return c.SubmitVMUnitRecorded(ctx, u, nil)
}

// GrantTx writes the catalog's part of a grant within the transaction
// that inserts its River job (internal/fleet: the task's start,
// postgres.StartTaskTx).
type GrantTx func(ctx context.Context, tx pgx.Tx) error

// SubmitVMUnitRecorded is SubmitVMUnit with record run in the same
// transaction, after the job's insert: the grant's job and its catalog
// rows commit together or not at all. A replayed grant (a Duplicate)
// records nothing again.
func (c *Client) SubmitVMUnitRecorded(ctx context.Context, u VMUnit, record GrantTx) (Submitted, error) {
	u.Protocol, u.TaskStarted, u.EndKey = ProtocolVersion, record != nil, newEndKey()
	return c.submitGrant(ctx, u.Worker, u, u.EndKey, u.VMName+"'s unit", record)
}

// submitGrant hands a grant of the dispatcher (a VM unit, a batch) to
// worker's queue in a transaction of its own, once per grant
// (uniqueGrant): a replayed grant is a Duplicate. record, if set, runs in
// that transaction after a first insert. key is args' EndKey.
func (c *Client) submitGrant(ctx context.Context, worker string, args river.JobArgs, key, what string, record GrantTx) (Submitted, error) {
	q, err := WorkerQueue(worker)
	if err != nil {
		return Submitted{}, err
	}
	var s Submitted
	heard := c.waiter.heard()
	err = pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		res, err := c.river.InsertTx(ctx, tx, args, &river.InsertOpts{Queue: q, MaxAttempts: 1, UniqueOpts: uniqueGrant()})
		if err != nil {
			return fmt.Errorf("fleet: hand %s off to %s: %w", what, worker, err)
		}
		s = Submitted{ID: res.Job.ID, Duplicate: res.UniqueSkippedAsDuplicate, heard: heard, key: key}
		if record == nil || s.Duplicate {
			return nil
		}
		if err := record(ctx, tx); err != nil {
			return fmt.Errorf("fleet: record the grant of %s to %s: %w", what, worker, err)
		}
		return nil
	})
	return s, err
}

// vmUnitWorker runs coffer_vm_unit jobs on a worker, fenced and completed
// as coffer_operation jobs are (operationWorker).
type vmUnitWorker struct {
	river.WorkerDefaults[VMUnit]
	ops    *operationWorker
	run    VMUnitFunc
	leader LeaderFenceFunc
}

// LeaderFenceFunc says whether a unit granted under epoch of the
// schedules lease may still run: an error (another server holds the lease
// since, under a later epoch) makes it complete as fenced. internal/fleet
// provides it (LeaderFence).
type LeaderFenceFunc func(ctx context.Context, epoch int64) error

func (w *vmUnitWorker) leaderFenced(ctx context.Context, epoch int64) error {
	if w.leader == nil {
		return nil
	}
	return w.leader(ctx, epoch)
}

// Work runs the unit unless it is fenced, and completes the job itself
// with the outcome (see operationWorker.Work).
//
// A unit that succeeded with a Commit commits its point and its task's
// end in the completion's transaction: the point is current in the
// catalog if and only if the job is complete.
func (w *vmUnitWorker) Work(ctx context.Context, job *river.Job[VMUnit]) error {
	out, commit := w.outcome(ctx, job.Args)
	if err := river.RecordOutput(ctx, out); err != nil {
		return err
	}
	complete, key := completeTx(job), job.Args.EndKey
	if commit == nil {
		return w.ops.completeJob(ctx, key, complete)
	}
	err := w.ops.completeJob(ctx, key, func(ctx context.Context, tx pgx.Tx) (*rivertype.JobRow, error) {
		if err := commit(ctx, tx); err != nil {
			return nil, &commitError{err}
		}
		return complete(ctx, tx)
	})
	var ce *commitError
	if !errors.As(err, &ce) {
		return err
	}
	// The point and the task's end were refused (a stale epoch) or failed:
	// nothing of them is in the catalog, and the outcome says so instead.
	u := job.Args
	w.ops.log.Info("VM unit's point not recorded", "vm", u.VMName, "job", u.Job, "task", u.Task, "attempt", u.Attempt, "err", ce.err)
	out = &Outcome{Worker: w.ops.name, Error: fmt.Sprintf("%s's point could not be recorded: %v", u.VMName, ce.err)}
	if errors.Is(ce.err, catalog.ErrFenced) {
		out.Fenced = true
	} else {
		out.ErrorClass, out.Transient = string(service.Classify(ce.err)), true
	}
	if err := river.RecordOutput(ctx, out); err != nil {
		return err
	}
	return w.ops.completeJob(ctx, key, complete)
}

// commitError is a unit's Commit that failed inside the completion's
// transaction.
type commitError struct{ err error }

func (e *commitError) Error() string { return e.err.Error() }

// outcome runs the unit; commit is its Commit when it succeeded with one
// (the outcome's document then says Recorded).
func (w *vmUnitWorker) outcome(ctx context.Context, u VMUnit) (out *Outcome, commit func(context.Context, pgx.Tx) error) {
	out = &Outcome{Worker: w.ops.name}
	defer func() {
		if r := recover(); r != nil {
			w.ops.log.Error("VM unit panicked", "vm", u.VMName, "panic", r, "stack", string(debug.Stack()))
			out.ErrorClass, out.Error = string(api.Internal), fmt.Sprintf("%s's unit panicked: %v", u.VMName, r)
		}
	}()
	if u.Protocol != ProtocolVersion {
		out.ErrorClass, out.Error = string(api.UnsupportedVersion), fmt.Sprintf("the unit speaks protocol %d, this worker %d", u.Protocol, ProtocolVersion)
		return out, nil
	}
	if err := w.ops.fencedFor(ctx, u.Worker, u.Epoch); err != nil {
		w.ops.log.Info("fenced VM unit completes without running", "vm", u.VMName, "worker", u.Worker, "epoch", u.Epoch, "err", err)
		out.Fenced, out.Error = true, err.Error()
		return out, nil
	}
	if err := w.leaderFenced(ctx, u.LeaderEpoch); err != nil {
		w.ops.log.Info("fenced VM unit of a stale leader completes without running", "vm", u.VMName, "job", u.Job, "task", u.Task,
			"attempt", u.Attempt, "leader_epoch", u.LeaderEpoch, "err", err)
		out.Fenced, out.Error = true, err.Error()
		return out, nil
	}
	if w.run == nil {
		out.ErrorClass, out.Error = string(api.Internal), "this worker runs no VM units"
		return out, nil
	}
	// A unit's span, in the worker's log: what a sweep of the workers'
	// logs checks the grants against (slots, one attempt of a VM at once).
	// (vm first, as connection/VM ID; then what the sweeps of the tests
	// read: the pools' keys, and the end's outcome.)
	attrs := []any{"vm", u.Connection + "/" + u.VMID, "job", u.Job, "task", u.Task, "attempt", u.Attempt, "worker", u.Worker,
		"connection", u.Connection, "vm_name", u.VMName, "host", u.Host, "datastores", u.Datastores}
	w.ops.log.Info("VM unit starts", append(attrs, "leader_epoch", u.LeaderEpoch)...)
	start := time.Now()
	done, err := w.run(ctx, u)
	if err == nil && ctx.Err() != nil {
		// Ended (fenced, cancelled) while it finished: it reports no
		// success, which its stale epoch would have the leader refuse
		// anyway; what it committed is a duplicate the retry supersedes.
		err = fmt.Errorf("%s's unit ended after its context: %w", u.VMName, context.Cause(ctx))
	}
	w.ops.log.Info("VM unit ends", append(attrs, "seconds", time.Since(start).Seconds(), "err", err)...)
	if err != nil {
		out.ErrorClass, out.Error = string(service.Classify(err)), err.Error()
		out.Transient = errors.Is(err, hypervisor.ErrTransient)
		if ctx.Err() != nil {
			out.ErrorClass = string(api.Cancelled)
		}
		// A worker that fenced itself meanwhile (a heartbeat it could not
		// renew in time cancels its running units) says so: the leader
		// retries the unit, as one fenced before it ran, rather than
		// recording the cut as the VM's failure.
		if ferr := w.ops.fencedFor(context.WithoutCancel(ctx), u.Worker, u.Epoch); ferr != nil {
			w.ops.log.Info("VM unit ended by its worker's fence", "vm", u.VMName, "job", u.Job, "task", u.Task, "err", ferr)
			out.Fenced, out.Error = true, fmt.Sprintf("%s (the worker was fenced: %v)", err, ferr)
		}
		return out, nil
	}
	if done.Commit != nil {
		done.Recorded, commit = true, done.Commit
	}
	out.Document, _ = json.Marshal(done) // a string and a document already marshalled always marshal
	return out, commit
}

// GrantedUnit is a VM unit's job not yet finished: a grant that may still
// occupy its worker.
type GrantedUnit struct {
	ID   int64
	Unit VMUnit
}

// unfinished are the states of a job that may still run: River fetches
// available ones, and retryable or scheduled ones become available.
var unfinished = []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable,
	rivertype.JobStateRunning, rivertype.JobStateScheduled}

// UnfinishedVMUnits lists every VM unit not yet finished, whichever
// leader granted it: what a server taking the schedules over counts as
// occupying its pools (engine.Hold) until each job finishes (Wait). A
// batch not yet finished is listed as one unit (Batch.Held).
func (c *Client) UnfinishedVMUnits(ctx context.Context) ([]GrantedUnit, error) {
	params := river.NewJobListParams().Kinds(VMUnitKind, BatchKind).States(unfinished...).First(1000)
	var out []GrantedUnit
	for {
		res, err := c.river.JobList(ctx, params)
		if err != nil {
			return nil, fmt.Errorf("fleet: list the VM units not finished: %w", err)
		}
		for _, j := range res.Jobs {
			var u VMUnit
			if j.Kind == BatchKind {
				var b Batch
				if err := json.Unmarshal(j.EncodedArgs, &b); err != nil {
					return nil, fmt.Errorf("fleet: batch %d's arguments: %w", j.ID, err)
				}
				out = append(out, GrantedUnit{ID: j.ID, Unit: b.Held()})
				continue
			}
			if err := json.Unmarshal(j.EncodedArgs, &u); err != nil {
				return nil, fmt.Errorf("fleet: VM unit %d's arguments: %w", j.ID, err)
			}
			out = append(out, GrantedUnit{ID: j.ID, Unit: u})
		}
		if len(res.Jobs) < 1000 {
			return out, nil
		}
		params = params.After(res.LastCursor)
	}
}
