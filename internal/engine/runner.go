package engine

import (
	"context"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
)

// Placement is where the dispatcher started an attempt of a VM's backup,
// and which one it is: enough for a hand-off to carry it to its worker
// and fence what comes back (job, task, attempt).
type Placement struct {
	// Worker is the worker whose slot the unit took; "" when the engine
	// has no workers (everything runs in this process).
	Worker  string
	JobID   int64
	TaskID  int64
	Attempt int
	// Connection and VM name the VM, VMID is its ID; Host and Datastores
	// are where it is, as the dispatcher counted its limits.
	Connection, VM, VMID, Host string
	Datastores                 []string
	// Mode and SnapshotMode are what the dispatcher decided for the
	// attempt (full or incremental, the snapshot's kind).
	Mode, SnapshotMode string
	// Policy and Repository are the policy whose run this is and its
	// repository ("": the default), from which a worker builds the
	// attempt (attempt.Request); Policy is "" for a backup of one VM
	// (One) and for what must run in this process (a group's read of a
	// batch snapshot: One is nil too).
	Policy, Repository string
	// One is the backup of one VM whose attempt this is (set with
	// Repository and LoadPoint): what it asked for, from which a worker
	// builds the attempt as this engine would.
	One *VMBackup
	// Pools are the keys of the pools the attempt occupies, a key once
	// per slot, its worker's included: what a leader taking over counts
	// as occupied while the attempt runs (Engine.Hold).
	Pools []string
	// Rate is the most bytes/s the attempt may read, its share of
	// limits.rate (Job.rateShare; 0: unlimited), besides limits.task-rate.
	Rate policy.ByteRate
	// LoadPoint reads a point of the job's repository by its ID: the one
	// a worker committed, which the engine then records as its own (set
	// with Policy or One).
	LoadPoint func(ctx context.Context, id string) (*repo.Point, error)
	// Progress is the attempt's progress, which the job's progress reads
	// (Job.Progress): local feeds it, and a runner that runs the attempt
	// elsewhere feeds it from what the attempt reports (never nil).
	Progress *backup.Progress
	// Started is when the task's first attempt started, for a runner
	// that records the attempt's start itself (StartRecorder).
	Started time.Time
	// Committed is called by a runner, before RunAttempt returns the
	// point, when the point and the task's end were committed in the
	// catalog where the attempt ran (a worker's completion transaction):
	// the engine then records neither again.
	Committed func()
}

// StartRecorder is a UnitRunner that records in the catalog itself the
// start of the attempts it hands off (a worker's grant commits the task's
// start with its job): the engine leaves the task's row to it until the
// attempt returns, and has nothing of that task pending in its own
// batched writes meanwhile, so that none lands over the worker's end.
type StartRecorder interface {
	RecordsStart(p Placement) bool
}

// UnitRunner runs an attempt where the dispatcher placed it. The engine
// keeps the attempt's bookkeeping (its slots, the task's record, the
// retry decision) and hands the runner only the attempt itself, so that a
// River hand-off (internal/fleet) can run it on the placed worker and
// return its outcome; local is the attempt as this process runs it, which
// the default runner calls. The runner must return once ctx ends: a lost
// worker's attempt is cancelled with ErrWorkerLost, and its slots are
// given back when RunAttempt returns.
type UnitRunner interface {
	RunAttempt(ctx context.Context, p Placement, local func(context.Context) (*repo.Point, error)) (*repo.Point, error)
}

// InProcess is the default runner: the attempt runs in the goroutine the
// dispatcher started for it, in this process, wherever it was placed.
type InProcess struct{}

// RunAttempt implements UnitRunner.
func (InProcess) RunAttempt(ctx context.Context, _ Placement, local func(context.Context) (*repo.Point, error)) (*repo.Point, error) {
	return local(ctx)
}

// workerName is the name of the worker a started unit runs on.
func (u *unit) workerName() string {
	if u.worker == nil {
		return ""
	}
	return u.worker.name
}
