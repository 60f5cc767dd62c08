package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/taskstarted"
)

// operationWorker runs coffer_operation jobs: an operation by its ID,
// through the service of the process that works the queue.
type operationWorker struct {
	river.WorkerDefaults[Args]
	client *Client
	name   string
	epoch  int64
	svc    *service.Service
	fence  FenceFunc
	lease  LeaseFunc
	log    *slog.Logger
}

// Work runs the job's operation unless the job is fenced, and completes
// the job itself with the outcome: whatever the operation's result, the
// hand-off did its work, and the outcome (document, error class) is
// coffer's to judge, not River's to retry.
func (w *operationWorker) Work(ctx context.Context, job *river.Job[Args]) error {
	out := w.runRecovering(ctx, job.ID, job.Args)
	if err := river.RecordOutput(ctx, out); err != nil {
		// A document River cannot hold (over 32 MB): say so instead.
		out = &Outcome{Worker: w.name, ErrorClass: string(api.Internal), Error: fmt.Sprintf("the outcome cannot be recorded: %v", err)}
		if err := river.RecordOutput(ctx, out); err != nil {
			return err
		}
	}
	return w.completeJob(ctx, job.Args.EndKey, completeTx(job))
}

// runRecovering is run, with a panic of the operation as its outcome
// (class internal): River would recover it too, but end the job without
// an outcome nor the NOTIFY its waiter sleeps on.
func (w *operationWorker) runRecovering(ctx context.Context, id int64, a Args) (out *Outcome) {
	defer func() {
		if r := recover(); r != nil {
			w.log.Error("operation panicked", "operation", a.Operation, "panic", r, "stack", string(debug.Stack()))
			out = &Outcome{Worker: w.name, ErrorClass: string(api.Internal), Error: fmt.Sprintf("%s panicked: %v", a.Operation, r)}
		}
	}()
	return w.run(ctx, id, a)
}

// run is the job's outcome.
func (w *operationWorker) run(ctx context.Context, id int64, a Args) *Outcome {
	out := &Outcome{Worker: w.name}
	fail := func(class api.Class, err error) *Outcome {
		out.ErrorClass, out.Error = string(class), err.Error()
		return out
	}
	if a.Protocol != ProtocolVersion {
		return fail(api.UnsupportedVersion, fmt.Errorf("the job speaks protocol %d, this worker %d", a.Protocol, ProtocolVersion))
	}
	if err := w.fencedFor(ctx, a.Worker, a.Epoch); err != nil {
		w.log.Info("fenced hand-off completes without running", "operation", a.Operation, "worker", a.Worker, "epoch", a.Epoch, "err", err)
		out.Fenced = true
		return fail("", err)
	}
	ctx, err := w.takeAsLeader(ctx, id, a)
	if err != nil {
		w.log.Info("forwarded operation goes back to its forwarder", "operation", a.Operation, "hand_off", id, "err", err)
		out.Fenced = true
		return fail("", err)
	}
	op := service.OperationByID(w.svc.Config.Operations, a.Operation)
	if op == nil {
		return fail(api.Invalid, fmt.Errorf("this worker has no operation %q", a.Operation))
	}
	in := reflect.New(op.Endpoint.Input()).Interface()
	if err := json.Unmarshal(a.Input, in); err != nil {
		return fail(api.Invalid, fmt.Errorf("%s's input: %w", a.Operation, err))
	}
	if w.client.queue == LeaderQueue && a.User != "" {
		ctx = job.WithUser(ctx, job.User{Name: a.User, Token: a.Token})
	}
	if w.client.worksWorkerQueue() {
		// A worker runs a server's hand-off: the server records its job
		// (service.OnWorker), whatever this worker's role may write.
		ctx = service.WithJobRecordedElsewhere(ctx)
	}
	doc, _, err := w.svc.InvokePage(ctx, a.Operation, in)
	if doc != nil {
		b, merr := json.Marshal(doc)
		if merr != nil {
			return fail(api.Internal, fmt.Errorf("%s's document: %w", a.Operation, merr))
		}
		out.Document = b
	}
	if err != nil {
		// A worker that fenced itself meanwhile (its fence ends the
		// queue, and so the operation's context) says so, as for a VM
		// unit (vmUnitWorker.outcome): the cut is no cancel its caller
		// asked for, nor the operation's own failure.
		if ferr := w.fencedFor(context.WithoutCancel(ctx), a.Worker, a.Epoch); ferr != nil && ctx.Err() != nil {
			w.log.Info("operation ended by its worker's fence", "operation", a.Operation, "hand_off", id, "err", ferr)
			out.Fenced = true
			return fail("", fmt.Errorf("%w (the worker was fenced: %w)", err, ferr))
		}
		if errors.Is(context.Cause(ctx), river.ErrJobCancelledRemotely) {
			return fail(api.Cancelled, fmt.Errorf("cancelled: %w", err))
		}
		return fail(service.Classify(err), err)
	}
	return out
}

// fencedFor says why a job granted to worker at epoch must not run: it
// names another worker or an older registration of this one (a stale job
// left by the process this one replaced), or the registry refuses its
// epoch.
func (w *operationWorker) fencedFor(ctx context.Context, worker string, epoch int64) error {
	if worker != w.name && w.client.worksWorkerQueue() {
		return fmt.Errorf("the job is for worker %s, this is %s", worker, w.name)
	}
	if w.epoch != 0 && epoch != w.epoch {
		return fmt.Errorf("the job is for epoch %d of worker %s, this is epoch %d", epoch, worker, w.epoch)
	}
	if w.fence != nil {
		return w.fence(ctx, worker, epoch)
	}
	return nil
}

// takeAsLeader records, on a leader's client, the epoch of the schedules
// lease job id runs under, or says why it must not run here (this server
// no longer holds the lease). The context it returns carries the jobs
// the operation resumes (a, forwarded again after a lost leader), and
// records, beside the epoch, the catalog job the operation starts
// (taskstarted.Note, before its first attempt), for the forwarder to
// name should this leader be lost too.
func (w *operationWorker) takeAsLeader(ctx context.Context, id int64, a Args) (context.Context, error) {
	if w.lease == nil || w.client.queue != LeaderQueue {
		return ctx, nil
	}
	epoch, err := w.lease(ctx)
	if err != nil {
		return ctx, err
	}
	if _, err := w.client.river.JobUpdate(ctx, id, &river.JobUpdateParams{Output: Outcome{Worker: w.name, LeaderEpoch: epoch}}); err != nil {
		return ctx, fmt.Errorf("the epoch it runs under cannot be recorded: %w", err)
	}
	ctx = job.WithResumes(ctx, a.Resumes)
	return taskstarted.With(ctx, func(catalogJob int64) {
		out := Outcome{Worker: w.name, LeaderEpoch: epoch, Job: catalogJob}
		if _, err := w.client.river.JobUpdate(ctx, id, &river.JobUpdateParams{Output: out}); err != nil {
			// The forwarder, should this leader be lost, forwards it
			// again without naming this job: a unit of it handed off
			// may then commit a point beside the next one's.
			w.log.Warn("the job a forwarded operation runs as cannot be recorded on its hand-off", "hand_off", id, "job", catalogJob, "err", err)
		}
	}), nil
}

// completeJob ends the job in one transaction with the NOTIFY that wakes its
// submitter's Wait: River's own completion is batched and announces
// nothing, so a waiter would otherwise have to poll. The notice carries
// the outcome under the job's end key (endPayload), read from the row as
// complete leaves it: what the notice says is what the transaction
// commits, or neither is. The completion runs even if the job's context
// was cancelled (a cancelled operation's outcome is recorded too).
// (complete is River's JobCompleteTx for the job's kind: completeTx.)
func (w *operationWorker) completeJob(ctx context.Context, key string, complete func(context.Context, pgx.Tx) (*rivertype.JobRow, error)) error {
	ctx = context.WithoutCancel(ctx)
	return pgx.BeginFunc(ctx, w.client.pool, func(tx pgx.Tx) error {
		row, err := complete(ctx, tx)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, doneChannel, endPayload(row, key))
		return err
	})
}

// riverDriver is the driver the jobs are completed through.
type riverDriver = *riverpgxv5.Driver
