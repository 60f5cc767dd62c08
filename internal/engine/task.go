package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"golang.org/x/time/rate"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine/attempt"
	"github.com/coffer-backup/coffer/internal/engine/opguard"
	"github.com/coffer-backup/coffer/internal/engine/ratelimit"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
)

// task is the work on one VM. Its record is guarded by Job.mu.
type task struct {
	j          *Job
	conn       hypervisor.Connector
	vm         hypervisor.VM
	modeReason string
	size       int64
	rec        catalog.Task
	attempt    int
	prog       *backup.Progress // of the running attempt
	held       *heldSnapshot    // group mode: the snapshot taken in the batch
	// superseded counts the runs the job resumes whose task of the VM
	// is settled (supersede); adoptable is the point one of them, job
	// adoptFrom, had committed ("": none).
	superseded int
	adoptable  string
	adoptFrom  int64
	// What the task ended with, for Job.Point: the point, or the last
	// attempt's error itself (its class is lost in rec.Error's text).
	snap *repo.Point
	err  error
}

func (j *Job) createTasks(targets []target) error {
	points := map[string][]policy.Point{}
	for _, s := range j.history {
		points[s.Source.Key()] = append(points[s.Source.Key()], policy.Point{Time: s.Time, Mode: s.Mode})
	}
	now := time.Now()
	// Built aside and published under Job.mu once recorded: Progress and
	// Tasks read the list meanwhile.
	tasks := make([]*task, 0, len(targets))
	recs := make([]*catalog.Task, len(targets))
	for i, tg := range targets {
		conn := j.s.conns[tg.conn]
		src := repo.Source{Kind: conn.Kind(), Connection: tg.conn, VMID: tg.vm.ID, VMName: tg.vm.Name}
		mode, why := j.p.ModeFor(now, points[src.Key()])
		if j.one != nil {
			mode, why = j.one.Mode, "" // asked for, not scheduled
		}
		t := &task{j: j, conn: conn, vm: tg.vm, modeReason: why, size: tg.vm.ProvisionedBytes()}
		t.rec = catalog.Task{JobID: j.record.ID, Connection: tg.conn, VMID: tg.vm.ID, VMName: tg.vm.Name, Host: tg.vm.Host,
			Datastores: tg.vm.Datastores, Status: catalog.StatusQueued, Mode: mode, SnapshotMode: j.snapshotMode()}
		tasks = append(tasks, t)
		recs[i] = &t.rec
	}
	if err := j.e.o.Catalog.CreateTasks(j.ctx, recs); err != nil {
		return fmt.Errorf("record tasks: %w", err)
	}
	j.mu.Lock()
	j.tasks = tasks
	j.mu.Unlock()
	j.pending.Add(len(tasks))
	return nil
}

func (j *Job) snapshotMode() string {
	if j.p.Snapshot == "" {
		return string(hypervisor.CrashConsistent)
	}
	return j.p.Snapshot
}

// schedule hands the tasks to the dispatcher, as per-VM units or, for
// group: datastore, as storage-level batches.
func (j *Job) schedule() {
	var units []*unit
	if j.p.Group == "datastore" {
		units = j.groupUnits()
	} else {
		for _, t := range j.tasks {
			units = append(units, j.vmUnit(t))
		}
	}
	context.AfterFunc(j.ctx, j.dropQueued)
	j.e.disp.submit(units...)
}

// needs lists the slots a VM occupies: the global pool, its host and
// datastores (unless reading from a storage snapshot, which spares the
// hypervisor), its resource groups, the repository's write streams and
// the policy's own cap.
func (j *Job) needs(t *task, hypervisorSide, repository bool) []*resource {
	d := j.e.disp
	rs := []*resource{d.global}
	for _, n := range SlotNeeds(j.s.cfg, j.s.limits, j.p, t.rec.Connection, t.vm, hypervisorSide, repository) {
		rs = append(rs, d.resource(n.Key, n.Cap))
	}
	return rs
}

func (j *Job) vmUnit(t *task) *unit {
	u := &unit{owner: j, needs: needsOf(j.needs(t, t.held == nil, true)...), size: t.size}
	u.route, u.onWait = t.route(), t.noteWait
	if t.held == nil {
		u.vm = t.rec.Connection + "/" + t.rec.VMID
	}
	u.run = func(u *unit) { t.run(u) }
	u.drop = func() { t.finish(catalog.StatusCancelled, "cancelled before it started") }
	return u
}

// dropQueued marks every unit still queued as cancelled.
func (j *Job) dropQueued() {
	for _, u := range j.e.disp.cancel(j) {
		u.drop()
	}
}

// resubmit queues a unit again (after a retry backoff), unless the job
// was cancelled meanwhile.
func (j *Job) resubmit(us ...*unit) {
	if j.ctx.Err() != nil {
		for _, u := range us {
			u.drop()
		}
		return
	}
	j.e.disp.submit(us...)
	if j.ctx.Err() != nil { // cancelled between the check and the submit
		j.dropQueued()
	}
}

// run is one attempt, started by the dispatcher with all slots taken.
func (t *task) run(u *unit) {
	j := t.j
	if j.ctx.Err() != nil {
		j.e.disp.done(u)
		t.finish(catalog.StatusCancelled, "cancelled before it started")
		return
	}
	if t.held == nil && t.rec.SnapshotMode == string(hypervisor.AsIs) {
		// No hypervisor snapshot and no storage snapshot: only a VM that
		// does not run gives a consistent image.
		if why := policy.LiveReadProblem(t.vm); why != "" {
			j.e.disp.done(u)
			t.err = fmt.Errorf("%w: %s", hypervisor.ErrUnsupported, why)
			t.finish(catalog.StatusFailed, why)
			return
		}
	}
	prog := &backup.Progress{}
	j.mu.Lock()
	t.attempt++
	t.prog = prog
	t.rec.Attempts = t.attempt
	t.rec.Status = catalog.StatusRunning
	if t.rec.StartedAt.IsZero() {
		t.rec.StartedAt = time.Now()
	}
	rec := t.rec
	j.mu.Unlock()
	start := time.Now()
	var snap *repo.Point
	var committed bool
	pointID, from, err := t.supersede()
	if err == nil && pointID != "" {
		if err = t.adopt(pointID, from); err == nil {
			j.e.disp.done(u)
			return
		}
	}
	if err == nil {
		snap, committed, err = t.attemptOn(u, rec, prog)
	}
	j.e.disp.done(u)
	rt := j.p.Retries.WithDefaults()
	switch {
	case err == nil:
		t.succeed(snap, time.Since(start), committed)
	case j.ctx.Err() != nil:
		t.err = err
		t.finish(catalog.StatusCancelled, fmt.Sprintf("cancelled while running: %v", err))
	case retryable(err) && t.attempt < rt.Attempts:
		d := backoff(rt, t.attempt)
		t.event("warn", "retry", fmt.Sprintf("attempt %d of %d failed: %v; retrying in %s", t.attempt, rt.Attempts, err, d.Round(time.Millisecond)),
			map[string]any{"attempt": t.attempt, "backoff_seconds": d.Seconds()})
		t.setStatus(catalog.StatusQueued)
		next := u
		if t.held != nil { // the group snapshot is gone: retry VM by VM
			t.closeHeld(false)
			next = j.vmUnit(t)
		}
		go func() {
			wait(j.ctx, d)
			j.resubmit(next)
		}()
	default:
		t.err = err
		t.finish(catalog.StatusFailed, err.Error())
	}
}

// attemptOn runs the attempt rec (its record at the start) where u was
// placed; committed: the runner says the point and the task's end are in
// the catalog already (Placement.Committed).
func (t *task) attemptOn(u *unit, rec catalog.Task, prog *backup.Progress) (snap *repo.Point, committed bool, err error) {
	j := t.j
	pl := Placement{Started: rec.StartedAt, Committed: func() { committed = true }, Worker: u.workerName(), JobID: j.record.ID, TaskID: rec.ID, Attempt: rec.Attempts, Connection: rec.Connection, VM: rec.VMName,
		VMID: rec.VMID, Host: t.vm.Host, Datastores: t.vm.Datastores, Mode: rec.Mode, SnapshotMode: rec.SnapshotMode, Pools: u.poolKeys(),
		Rate: j.rateShare(u), Progress: prog}
	if j.one == nil && t.held == nil { // a policy's VM-by-VM attempt: a worker can run it from the policy alone
		pl.Policy, pl.Repository, pl.LoadPoint = j.p.Name, j.p.Repository, j.loadPoint
	} else if t.held == nil { // a backup of one VM: from what it asked for
		pl.One, pl.Repository, pl.LoadPoint = j.one, j.p.Repository, j.loadPoint
	}
	if sr, ok := j.e.o.UnitRunner.(StartRecorder); ok && sr.RecordsStart(pl) {
		j.rec.forget(rec.ID) // the grant's transaction records the start
	} else {
		j.rec.task(rec)
	}
	snap, err = j.e.o.UnitRunner.RunAttempt(u.ctx, pl, func(ctx context.Context) (*repo.Point, error) { return t.attemptOnce(ctx, prog, pl.Rate) })
	if err != nil && errors.Is(context.Cause(u.ctx), ErrWorkerLost) && j.ctx.Err() == nil {
		// %v, not %w: the context's Canceled is never retried, and a
		// lost worker's attempt is.
		err = fmt.Errorf("%w (attempt on worker %s abandoned: %v)", ErrWorkerLost, pl.Worker, err)
	}
	return snap, committed, err
}

var errVMTimeout = errors.New("VM timeout exceeded")

// attemptOnce backs the VM up once, bounded by the per-VM timeout, through
// a connector guarded by the per-operation timeouts; parent is the
// attempt's context (the job's, and its worker's loss).
func (t *task) attemptOnce(parent context.Context, prog *backup.Progress, share policy.ByteRate) (*repo.Point, error) {
	j := t.j
	limit := j.p.Timeouts.VM
	if limit == 0 {
		limit = policy.DefaultVMTimeout
	}
	ctx, cancel := context.WithTimeoutCause(parent, limit, fmt.Errorf("%w (%s)", errVMTimeout, limit))
	defer cancel()
	perTask := ratelimit.Min(j.s.limits.TaskRate, share)
	ths := j.e.watch.Join(t.latencyUnit(perTask))
	defer ths.Leave()
	req := attempt.Of(j.p, t.spec(time.Now()))
	req.Chain, req.Tags, req.RetainUntil = j.chain(), attempt.Tags(j.p, j.one == nil), j.lockUntil(time.Now())
	opts := backup.Options{Workers: j.e.o.Workers, Limiter: ths.Limit(taskLimiter(j.e.total, perTask, share)), Progress: prog,
		ChangeCheckSpans: j.p.ChangeCheck, Note: func(m string) { t.event("info", "data-path", t.vm.Name+": "+m, nil) }, Nice: ths.Nice()}
	var snap *repo.Point
	var err error
	if t.held != nil {
		snap, err = t.readHeld(ctx, req, opts)
	} else {
		g := t.guard()
		g.Watch = ths.WatchSession
		snap, err = j.e.o.Runner(ctx, j.w, g, req, opts)
	}
	if err != nil && errors.Is(context.Cause(ctx), errVMTimeout) && j.ctx.Err() == nil {
		err = fmt.Errorf("%w: %w", context.Cause(ctx), err)
	}
	return snap, err
}

// chain names the backup chain for connectors that keep change tracking
// per chain: the policy's (attempt.Chain), or the one a backup of one VM
// asked for.
func (j *Job) chain() string {
	if j.one != nil {
		return j.one.Chain
	}
	return attempt.Chain(j.p)
}

// lockUntil is the lock of a point whose backup starts at now (zero: no
// lock): the policy's immutable-for, or the lock a backup of one VM asked
// for.
func (j *Job) lockUntil(now time.Time) time.Time {
	if j.one != nil {
		return j.one.RetainUntil
	}
	return j.p.RetainUntil(now)
}

// loadPoint reads a point of the job's repository by its ID.
func (j *Job) loadPoint(ctx context.Context, pointID string) (*repo.Point, error) {
	x, err := id.Parse(pointID)
	if err != nil {
		return nil, fmt.Errorf("point %q: %w", pointID, err)
	}
	return j.r.LoadPoint(ctx, x)
}

// spec is what the dispatcher decided for the task's attempt starting at
// now, for attempt.Request (here, or on the worker it is handed to).
func (t *task) spec(now time.Time) attempt.Spec {
	return attempt.Spec{Connection: t.rec.Connection, VM: t.vm.VMRef, Mode: t.rec.Mode, SnapshotMode: t.rec.SnapshotMode,
		JobID: t.j.record.ID, History: t.j.history, Now: now}
}

// ceiling is the most the task may read in bytes/s by its static limits
// (0: unlimited), where latency throttling starts and ends; perTask is
// its own bucket's rate (task-rate, or its share of rate if lower).
func (t *task) ceiling(perTask policy.ByteRate) float64 {
	c := math.Inf(1)
	if r := perTask; r > 0 {
		c = float64(r)
	}
	if l := t.j.e.total.Limit(); l != rate.Inf {
		c = math.Min(c, float64(l))
	}
	if math.IsInf(c, 1) {
		return 0
	}
	return c
}

func (t *task) guard() *opguard.Guard {
	return opguard.New(t.conn, t.j.p.Timeouts, t.noteOp, t.j.e.background)
}

// noteOp records a hypervisor operation's duration as an event.
func (t *task) noteOp(kind string, took time.Duration, err error) {
	level, msg := "info", fmt.Sprintf("%s of %s took %s", kind, t.vm.Name, took.Round(time.Millisecond))
	if err != nil {
		level, msg = "warn", fmt.Sprintf("%s of %s failed after %s: %v", kind, t.vm.Name, took.Round(time.Millisecond), err)
	}
	t.event(level, kind, msg, map[string]any{"seconds": took.Seconds()})
}

func (t *task) event(level, kind, msg string, fields map[string]any) {
	t.j.run.Record(catalog.Event{JobID: t.j.record.ID, TaskID: t.rec.ID, Level: level, Kind: kind, Message: msg, Fields: fields})
}

func (t *task) setStatus(s catalog.Status) {
	t.j.mu.Lock()
	t.rec.Status = s
	rec := t.rec
	t.j.mu.Unlock()
	t.j.rec.task(rec)
}

// succeed ends the task with its point; committed: the point and the
// task's end are in the catalog already (Placement.Committed), and only
// the job's own record and log take them.
func (t *task) succeed(snap *repo.Point, took time.Duration, committed bool) {
	j := t.j
	t.closeHeld(true)
	j.mu.Lock()
	t.rec.Status, t.rec.FinishedAt, t.rec.Error = catalog.StatusSuccess, time.Now(), ""
	t.snap = snap
	if snap != nil {
		t.rec.BackupPointID, t.rec.Mode, t.rec.Warnings = snap.ID.String(), snap.Mode, snap.Warnings
		t.rec.SnapshotModeAchieved = snap.SnapshotModeAchieved
		t.rec.BytesLogical, t.rec.BytesRead, t.rec.BytesStored = snap.Logical(), snap.BytesRead, snap.BytesStored
	}
	rec := t.rec
	// The planner's capacity forecast reads what a point added and how
	// much of its disks is zero (internal/plan/capacity.go).
	var bytesNew, bytesZero int64
	if snap != nil {
		bytesNew = snap.BytesNew
		for _, d := range snap.Disks {
			bytesZero += d.BytesZero
		}
	}
	var setup, transfer time.Duration
	if t.prog != nil {
		setup, transfer = time.Duration(t.prog.SetupNanos.Load()), time.Duration(t.prog.TransferNanos.Load())
	}
	t.prog = nil
	j.mu.Unlock()
	if !committed {
		j.rec.task(rec)
	}
	fields := map[string]any{"seconds": took.Seconds(), "bytes_logical": rec.BytesLogical, "bytes_read": rec.BytesRead,
		"bytes_stored": rec.BytesStored, "read_mb_per_s": float64(rec.BytesRead) / 1e6 / max(took.Seconds(), 1e-9), "attempts": rec.Attempts,
		"setup_seconds": setup.Seconds(), "transfer_seconds": transfer.Seconds(), "bytes_new": bytesNew, "bytes_zero": bytesZero}
	msg := fmt.Sprintf("%s backed up (%s) in %s", t.vm.Name, rec.Mode, took.Round(time.Millisecond))
	if t.modeReason != "" {
		msg += "; full because: " + t.modeReason
	}
	t.event("info", "task-done", msg, fields)
	for _, w := range rec.Warnings {
		t.event("warn", "warning", w, nil)
	}
	if snap != nil && j.r != nil && !committed {
		j.rec.point(catalog.BackupPoint{Repository: j.r.Config().ID, ID: snap.ID.String(), Time: snap.Time, Connection: rec.Connection,
			VMID: rec.VMID, VMName: rec.VMName, Mode: snap.Mode, Parent: snap.Parent, Disks: len(snap.Disks),
			BytesLogical: snap.Logical(), BytesStored: snap.BytesStored, Tags: snap.Tags, Protected: snap.Protected, JobID: j.record.ID,
			SnapshotMode: snap.SnapshotMode, SnapshotModeAchieved: snap.SnapshotModeAchieved, Hooks: snap.Hooks})
	}
	j.pending.Done()
}

// finish ends a task that did not succeed.
func (t *task) finish(status catalog.Status, msg string) {
	j := t.j
	t.closeHeld(false)
	j.mu.Lock()
	t.rec.Status, t.rec.Error, t.rec.FinishedAt = status, msg, time.Now()
	t.prog = nil
	rec := t.rec
	j.mu.Unlock()
	j.rec.task(rec)
	level := "warn"
	if status == catalog.StatusFailed {
		level = "error"
	}
	t.event(level, "task-"+string(status), fmt.Sprintf("%s %s: %s", t.vm.Name, status, msg), map[string]any{"attempts": rec.Attempts})
	j.pending.Done()
}

// retryable reports errors worth another attempt: transient hypervisor
// conditions, including operation timeouts.
func retryable(err error) bool {
	return errors.Is(err, hypervisor.ErrTransient) && !errors.Is(err, context.Canceled)
}

// backoff is the wait before attempt+1: Backoff doubled per attempt,
// capped, with ±20% jitter so retries of many VMs spread out.
func backoff(r policy.Retries, attempt int) time.Duration {
	d := r.Backoff << min(attempt-1, 30)
	if d > r.MaxBackoff || d <= 0 {
		d = r.MaxBackoff
	}
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// wait sleeps d unless ctx ends first; it reports whether d elapsed.
func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
