package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// Unit is an admitted unit of work: the operation to run, and the grant
// that admitted it.
type Unit struct {
	// Worker and Epoch are the worker the grant names, and its
	// registration (checked by the worker's fence); Worker "" hands the
	// unit to the servers' own queue (ServerQueue).
	Worker string
	Epoch  int64
	// Operation is the operation's ID; Input its input struct (a pointer
	// to op.Endpoint.Input()'s type), marshalled to JSON.
	Operation string
	Input     any
	// Job, Task and Attempt identify the grant in the catalog (0: none).
	// With a Job, a second insert of the same (Job, Task, Attempt) is a
	// no-op that returns the first one's River job.
	Job, Task int64
	Attempt   int
}

// Submitted is a hand-off's River job.
type Submitted struct {
	ID int64
	// Duplicate: the grant was handed off before (a replayed insert), and
	// ID is that first job.
	Duplicate bool
	// heard is the submitter's listener connection before the insert (0:
	// none), for WaitSubmitted.
	heard uint64
	// key is the job's end key (Args.EndKey): WaitSubmitted believes an
	// outcome its end notice carries only under it.
	key string
}

// SubmitTx hands u off within tx, the transaction that records its grant:
// either both commit or neither does, so a worker never runs a grant the
// catalog does not hold, and a granted slot is never left without its
// job. The worker starts it as soon as tx commits (River's insert
// NOTIFY).
func (c *Client) SubmitTx(ctx context.Context, tx pgx.Tx, u Unit) (Submitted, error) {
	args, opts, err := handOff(u)
	if err != nil {
		return Submitted{}, err
	}
	heard := c.waiter.heard()
	res, err := c.river.InsertTx(ctx, tx, args, opts)
	if err != nil {
		return Submitted{}, fmt.Errorf("fleet: hand %s off to %s: %w", u.Operation, u.Worker, err)
	}
	return Submitted{ID: res.Job.ID, Duplicate: res.UniqueSkippedAsDuplicate, heard: heard, key: args.EndKey}, nil
}

// Submit is SubmitTx in a transaction of its own, for a hand-off that
// records nothing else.
func (c *Client) Submit(ctx context.Context, u Unit) (Submitted, error) {
	var s Submitted
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) (err error) {
		s, err = c.SubmitTx(ctx, tx, u)
		return err
	})
	return s, err
}

func handOff(u Unit) (Args, *river.InsertOpts, error) {
	queue := ServerQueue
	if u.Worker != "" {
		var err error
		if queue, err = WorkerQueue(u.Worker); err != nil {
			return Args{}, nil, err
		}
	}
	if field := secretSet(reflect.ValueOf(u.Input), ""); field != "" {
		return Args{}, nil, fmt.Errorf("fleet: %s's input sets %s, a secret: a job's arguments never hold one (the worker has its own configuration)", u.Operation, field)
	}
	in, err := json.Marshal(u.Input)
	if err != nil {
		return Args{}, nil, fmt.Errorf("fleet: %s's input: %w", u.Operation, err)
	}
	args := Args{Operation: u.Operation, Input: in, Worker: u.Worker, Epoch: u.Epoch, Protocol: ProtocolVersion,
		Job: u.Job, Task: u.Task, Attempt: u.Attempt, EndKey: newEndKey()}
	opts := &river.InsertOpts{Queue: queue, MaxAttempts: 1}
	if u.Job != 0 {
		opts.UniqueOpts = uniqueGrant()
	}
	return args, opts, nil
}

// uniqueGrant makes a job unique by its arguments' unique fields (job,
// task, attempt) in every state, not River's default (which leaves
// cancelled and discarded out): a grant's replay must never run again,
// even after its first job ended.
func uniqueGrant() river.UniqueOpts {
	return river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStateCancelled, rivertype.JobStateCompleted,
		rivertype.JobStateDiscarded, rivertype.JobStatePending, rivertype.JobStateRetryable,
		rivertype.JobStateRunning, rivertype.JobStateScheduled,
	}}
}

// secretSet names the first field of v that is set and marked
// writeOnly:"true" (the API's tag for passwords and tokens: the OpenAPI
// document never returns them), "" if there is none.
func secretSet(v reflect.Value, path string) string {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return ""
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return ""
	}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		name := strings.TrimPrefix(path+"."+f.Name, ".")
		if f.Tag.Get("writeOnly") == "true" && !v.Field(i).IsZero() {
			return name
		}
		if s := secretSet(v.Field(i), name); s != "" {
			return s
		}
	}
	return ""
}

// Cancel cancels a hand-off: a job not yet started never runs, and a
// running one has its operation's context cancelled within moments on its
// worker (River's job control NOTIFY), which then completes it with the
// class cancelled. A job already finished is left as it is.
func (c *Client) Cancel(ctx context.Context, id int64) error {
	row, err := c.river.JobCancel(ctx, id)
	if err != nil {
		if errors.Is(err, rivertype.ErrNotFound) {
			return fmt.Errorf("fleet: no hand-off %d", id)
		}
		return fmt.Errorf("fleet: cancel hand-off %d: %w", id, err)
	}
	if row.FinalizedAt != nil {
		// River finalized it here (it had not started): nobody else will
		// wake its waiters. The notice is the ID alone (they read the
		// row): this is no completion's transaction, and off the path of
		// every unit that runs.
		_, err = c.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, doneChannel, strconv.FormatInt(id, 10))
	}
	return err
}
