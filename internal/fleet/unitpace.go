package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine/latency"
	"github.com/coffer-backup/coffer/internal/engine/opguard"
	"github.com/coffer-backup/coffer/internal/engine/ratelimit"
	"github.com/coffer-backup/coffer/internal/fleet/queue"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
)

// unitPace is what a worker's VM units get that the engine gives its own
// tasks, with the same code: the policy's per-operation timeouts
// (opguard), latency-driven throttling (latency) and live progress.
//
// Latency on a datastore several workers read: each worker watches the
// datastores its own units read, from its own host: the datastore's
// block device as this host sees it (/proc/diskstats: every I/O this
// host issues to it, production VMs' and backups') and the disks of the
// VMs it is reading (their hypervisor's counters). It throttles only its
// own units. That is sound for the latency-control section's purpose:
// the threshold bounds the latency production sees, and a VM sees the
// datastore from its host, which is the host its worker runs on (QEMU and
// libvirt units are host-bound; a vSphere unit's VM disks are measured
// through its session whatever the worker). When several hosts congest a
// shared array, each one's samples cross the threshold and each backs
// off on its own, as VMware's SIOC does per host: the limit is per host,
// the control loop needs no coordination, and no worker waits for
// another's numbers.
type unitPace struct {
	watch *latency.Watch
	log   *slog.Logger
}

func newUnitPace(watch *latency.Watch, log *slog.Logger) *unitPace {
	return &unitPace{watch: watch, log: log}
}

// progressEvery is how often a running unit's progress is recorded: the
// engine's flush interval, one small fenced write a second per unit.
const progressEvery = time.Second

// backUpVM is backup.BackupVM as the engine's task runs it: the
// connector guarded by the policy's timeouts, reads throttled by the
// latency of the VM's watched datastores (and the per-task rate), and the
// unit's progress recorded while it runs.
func (a *unitPace) backUpVM(ctx context.Context, w *repo.Writer, conn hypervisor.Connector, req backup.VMRequest, opts backup.Options,
	cfg *policy.Config, p policy.Policy, u queue.VMUnit, ev unitEvents) (*repo.Point, error) {
	event := func(level, kind, msg string, fields map[string]any) {
		if kind == "latency-throttle" { // the worker's own log says it too: its operator sees where it slows
			a.log.Info(msg, "job", u.Job, "task", u.Task, "vm", u.VMName, "kind", kind)
		}
		ev.record(ctx, level, kind, msg, fields)
	}
	// The task's own rate, or its share of the leader's rate if lower:
	// this worker's process holds no bucket of the fleet's.
	perTask := ratelimit.Min(cfg.Limits.TaskRate, policy.ByteRate(u.Rate))
	ceiling := float64(max(perTask, 0))
	ths := a.watch.Join(latency.Unit{Control: cfg.LatencyControl, Connection: u.Connection, Policy: p.Name, VM: u.VMName,
		Datastores: u.Datastores, Shares: p.Shares.Value(), Ceiling: ceiling, Repository: w, Event: event})
	defer ths.Leave()
	ops := &opNotes{ev: ev}
	defer ops.flush(ctx)
	g := opguard.New(conn, p.Timeouts, func(kind string, took time.Duration, err error) {
		if err != nil {
			ev.record(ctx, "warn", kind, fmt.Sprintf("%s of %s failed after %s: %v", kind, u.VMName, took.Round(time.Millisecond), err),
				map[string]any{"seconds": took.Seconds()})
			return
		}
		ops.add(kind, fmt.Sprintf("%s of %s took %s", kind, u.VMName, took.Round(time.Millisecond)), took)
	}, a.background)
	g.Watch = ths.WatchSession
	prog := &backup.Progress{}
	opts.Limiter, opts.Nice, opts.Progress = ths.Limit(unitLimiter(perTask, u.Rate > 0)), ths.Nice(), prog
	stop := a.report(ctx, prog, ev)
	defer stop()
	return backup.BackupVM(ctx, w, g, req, opts)
}

// background runs an abandoned hypervisor call's cleanup (a snapshot
// that came back after its timeout is closed). A worker that exits
// before it ends leaves the snapshot to CleanupLeftovers at its next
// start, as a killed one does.
func (a *unitPace) background(f func()) { go f() }

// report records the unit's bytes covered, read and stored in its task
// every progressEvery while it runs (the leader reads them into its job's
// progress: UnitProgress), until the function it returns, which returns
// once nothing more is written: the unit's outcome reaches the
// leader, which records the task's end with the point's figures, only
// after that (and a task no longer running is never overwritten). No
// sample is written at the end, so a unit shorter than progressEvery
// costs the catalog nothing more (bench/fleetscale's statements per VM).
func (a *unitPace) report(ctx context.Context, prog *backup.Progress, ev unitEvents) (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	var last [3]int64
	sample := func() {
		now := [3]int64{prog.BytesDone.Load(), prog.BytesRead.Load(), prog.BytesStored.Load()}
		if now == last {
			return
		}
		last = now
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), eventPatience) // a partition must not hold the unit
		defer cancel()
		err := ev.cat.SetWorkerTaskProgress(wctx, ev.u.Worker, ev.u.Epoch, ev.u.Task, now[0], now[1], now[2])
		if err != nil {
			a.log.Warn("cannot record a VM unit's progress", "job", ev.u.Job, "task", ev.u.Task, "err", err)
		}
	}
	go func() {
		defer close(stopped)
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// opNotes are a unit's hypervisor operations that went well, as the
// engine notes them in a task's log (the planner reads their durations,
// internal/plan), written in one fenced transaction at the unit's end
// rather than one each: a unit's catalog writes are the fleet's cost per
// VM. A failed one is written at once.
type opNotes struct {
	ev    unitEvents
	mu    sync.Mutex
	notes []catalog.Event
}

func (o *opNotes) add(kind, msg string, took time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.notes = append(o.notes, catalog.Event{JobID: o.ev.u.Job, TaskID: o.ev.u.Task, Time: time.Now(), Level: "info", Kind: kind, Message: msg,
		Fields: map[string]any{"seconds": took.Seconds(), "worker": o.ev.u.Worker, "attempt": o.ev.u.Attempt}})
}

func (o *opNotes) flush(ctx context.Context) {
	o.mu.Lock()
	notes := o.notes
	o.notes = nil
	o.mu.Unlock()
	if len(notes) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), eventPatience) // a partition must not hold the unit
	defer cancel()
	if err := o.ev.cat.AddWorkerEvents(ctx, o.ev.u.Worker, o.ev.u.Epoch, notes); err != nil {
		o.ev.log.Warn("cannot record a VM unit's events", "job", o.ev.u.Job, "task", o.ev.u.Task, "err", err)
	}
}
