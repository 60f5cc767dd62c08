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

// ErrCannotLock: a backup asks for a lock its repository cannot keep.
var ErrCannotLock = errors.New("the repository cannot lock objects")

// VMBackup is a backup of one VM now, outside any policy's schedule
// (`coffer backup vm`, the API's backup-vm). It is a job of its own kind
// with one task, and that task runs exactly as a policy's do: within the
// limits' slots (the global pool, the VM's host and datastores, its
// resource groups, the repository's streams, shared with the policy runs
// of the same engine), with the operation timeouts, the retries of
// transient errors and the hooks of Settings, its point recorded in the
// catalog; leftovers of a killed coffer were removed when the engine
// started (New).
type VMBackup struct {
	// Connection names the connector, VM the VM as its inventory lists it
	// (the caller finds it: a VM that is not there is the caller's error
	// to explain, not a failed job).
	Connection string
	VM         hypervisor.VM
	// Mode is full, incremental or differential (the first backup of a
	// VM is full whatever it says).
	Mode string
	// Settings are the policy settings the backup runs with: snapshot,
	// quiesce, tags, timeouts, retries, hooks, change-check and the
	// repository. Its name is no policy's: the point gets no policy tag,
	// no policy's retention thins it, no policy's task cap applies.
	// Schedule, selection, retention and group are not read.
	Settings policy.Policy
	// HookPolicies name the policies whose hooks Settings holds: a worker
	// the backup is handed to takes their hooks from its own
	// configuration, as a hand-off carries names, never commands.
	HookPolicies []string
	// Chain names the backup chain the VM's change tracking belongs to
	// (hypervisor.SnapshotRequest.Chain): a chain of its own, so that a
	// backup now never consumes the tracking of a policy's chain.
	Chain string
	// RetainUntil locks the point (object lock) until then; zero: no lock.
	RetainUntil time.Time
	// Resumes are the jobs of this backup that lost their leader (a
	// fleet's forwarded backup, forwarded again to the next leader), the
	// oldest first: before its first attempt, the VM's task in each is
	// superseded (catalog.Catalog.SupersedeTask), and a point one of
	// their units committed meanwhile is this backup's, not backed up
	// again (docs/design/fleet.md, "Runs that lose their leader").
	Resumes []int64
	// Started, when set, is told the job's ID once it is recorded and
	// before any attempt starts: a leader running a forwarded backup
	// records it where the forwarder finds it should the leader be lost.
	Started func(jobID int64)
	// Object is the job's access-control path (/repositories/main), and
	// Repository the name it records the repository by (Settings'
	// repository is what the engine opens: "" is the default one of
	// Options.OpenRepository, which may be a named one bound to it).
	Object, Repository string
}

// StartVM records a job backing up one VM and runs it in the background.
// Job.Point says, once it ended, what it made.
func (e *Engine) StartVM(ctx context.Context, b VMBackup) (*Job, error) {
	su := e.cur.Load()
	if su.conns[b.Connection] == nil {
		return nil, fmt.Errorf("connection %s: no connector available", b.Connection)
	}
	if b.Settings.Group != "" && b.Settings.Group != "vm" {
		return nil, fmt.Errorf("a backup of one VM is taken VM by VM, not as group %q", b.Settings.Group)
	}
	now := time.Now()
	run, err := e.startRun(ctx, catalog.Job{Kind: catalog.KindBackupVM, Repository: b.Repository,
		Object: b.Object, VM: b.VM.Name, Status: catalog.StatusRunning, Worker: e.o.Worker, CreatedAt: now, StartedAt: now})
	if err != nil {
		return nil, err
	}
	jctx, cancel := context.WithCancelCause(run.Context())
	one := b
	j := &Job{e: e, s: su, p: b.Settings, one: &one, ctx: jctx, cancel: cancel, done: make(chan struct{}), run: run, record: run.Job(),
		resumes: b.Resumes}
	j.rec = newRecorder(e.o.Catalog, e.log, e.o.FlushInterval, nil)
	if b.Started != nil {
		b.Started(j.record.ID)
	}
	go j.execute()
	return j, nil
}

// Point is what a job of one VM (StartVM) made, once it ended: its point
// and the ID of the repository holding it, or why there is none as the
// error itself, so that its class survives (a VM gone, a disk that
// changed, a full storage) where the job's record keeps only its text.
// A job that was cancelled returns the error its task ended with, or
// ErrCancelled when it ended before starting.
func (j *Job) Point() (*repo.Point, string, error) {
	<-j.done
	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case j.cause != nil:
		return nil, "", j.cause
	case len(j.tasks) != 1:
		return nil, "", fmt.Errorf("job %d backed up %d VMs, not one: %s", j.record.ID, len(j.tasks), j.record.Error)
	}
	t := j.tasks[0]
	switch {
	case t.snap != nil && j.r != nil:
		return t.snap, j.r.Config().ID, nil
	case t.err != nil:
		return nil, "", t.err
	case t.rec.Status == catalog.StatusCancelled:
		return nil, "", fmt.Errorf("%w: %s", ErrCancelled, t.rec.Error)
	}
	return nil, "", fmt.Errorf("%s: %s", t.rec.Status, t.rec.Error)
}
