package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine/attempt"
	"github.com/coffer-backup/coffer/internal/engine/latency"
	"github.com/coffer-backup/coffer/internal/fleet/queue"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/service"
)

// RunVMUnit is a worker's queue.VMUnitFunc: it runs the attempt the
// leader's dispatcher granted as the engine would in its own process
// (attempt.Request, backup.BackupVM), from this worker's configuration in
// effect: the policy, its connection (opened here, with its credentials)
// and its repository (with the password this process holds). Its notes
// go to the catalog as events of the job's task, so the job's log reads
// the same wherever the VM was backed up.
//
// repos keeps the repositories open across units (unitRepos); watch is
// the worker's latency watch, which throttles its units (unitPace).
func RunVMUnit(svc *service.Service, repos *unitRepos, watch *latency.Watch, log *slog.Logger) queue.VMUnitFunc {
	pace := newUnitPace(watch, log)
	return func(ctx context.Context, u queue.VMUnit) (_ queue.UnitDone, err error) {
		cfg, err := repos.configFor(ctx, u.Job)
		if err != nil {
			return queue.UnitDone{}, err
		}
		p, err := unitPolicy(svc, cfg, u)
		if err != nil {
			return queue.UnitDone{}, err
		}
		cat, err := svc.OpenCatalog(ctx)
		if err != nil {
			return queue.UnitDone{}, err
		}
		defer func() { _ = cat.Close() }() // a kept-open catalog's Close does nothing; the worker's own is the service's
		// The first event is written while the backup starts, not before
		// it: its transaction is off the unit's critical path (the events
		// after it wait for it, so the job's log keeps their order).
		started := make(chan struct{})
		go func() {
			defer close(started)
			unitEvents{cat: cat, u: u, log: log}.record(ctx, "info", "worker",
				fmt.Sprintf("%s: attempt %d runs on worker %s", u.VMName, u.Attempt, u.Worker), nil)
		}()
		defer func() { <-started }() // before the catalog's Close
		ev := unitEvents{cat: cat, u: u, log: log, after: started}
		point, err := backUp(ctx, svc, repos, pace, cfg, p, u, ev, OwnerGone(cat))
		if err != nil {
			ev.record(ctx, "warn", "worker", fmt.Sprintf("%s: attempt %d on worker %s failed: %v", u.VMName, u.Attempt, u.Worker, err), nil)
			return queue.UnitDone{}, err
		}
		done, err := unitDone(point)
		if err != nil {
			return done, err
		}
		ur, err := repos.get(ctx, p.Repository) // open since backUp
		if err != nil {
			return queue.UnitDone{}, err
		}
		return withCommit(done, u, ur.r.Config().ID, point), nil
	}
}

// backUp is the attempt: the connector opened for it alone, closed when
// it ends, and its job's write session on this worker (the point and its
// packs are committed by BackupVM).
func backUp(ctx context.Context, svc *service.Service, repos *unitRepos, pace *unitPace, cfg *policy.Config, p policy.Policy, u queue.VMUnit,
	ev unitEvents, ownerGone func(context.Context, string) (bool, error)) (_ *repo.Point, err error) {
	limit := p.Timeouts.VM
	if limit == 0 {
		limit = policy.DefaultVMTimeout
	}
	ctx, cancel := context.WithTimeoutCause(ctx, limit, fmt.Errorf("VM timeout exceeded (%s)", limit))
	defer cancel()
	conns, err := svc.OpenConnectors(ctx, cfg, []string{u.Connection})
	if err != nil {
		return nil, err
	}
	defer conns.Close()
	ur, err := openRepo(ctx, repos, p.Repository)
	if err != nil {
		return nil, err
	}
	r := ur.r
	history, err := ur.historyFor(ctx, u.Job)
	if err != nil {
		return nil, err
	}
	// The session names the worker's registration: a leader that gives up
	// on it ends the session, and the retry reuses what it stored. The
	// job's units on this worker share it (unitWriters).
	w, done, err := ur.writers.writer(ctx, r, u.Job, SessionOwner(u.Worker, u.Epoch), fmt.Sprintf("job %d policy %s worker %s", u.Job, p.Name, u.Worker))
	if err != nil {
		return nil, fmt.Errorf("open a write session: %w", err)
	}
	defer func() { err = errors.Join(err, done(err)) }()
	req := unitRequest(p, u, attempt.Spec{Connection: u.Connection, VM: hypervisor.VMRef{ID: u.VMID, Name: u.VMName},
		Mode: u.Mode, SnapshotMode: u.SnapshotMode, JobID: u.Job, History: history, Now: time.Now()})
	// The VM's snapshot names this registration: if the worker is killed,
	// a retry on another worker removes it once the registry says so.
	req.Owner, req.OwnerGone = SessionOwner(u.Worker, u.Epoch), ownerGone
	opts := backup.Options{ChangeCheckSpans: p.ChangeCheck,
		Note: func(m string) { ev.record(ctx, "info", "data-path", u.VMName+": "+m, nil) }}
	return pace.backUpVM(ctx, w, conns.Conns[u.Connection], req, opts, cfg, p, u, ev)
}

// unitDone is the outcome of a unit that committed point: its ID and its
// manifest as committed (encodeSnapshot marshals the same struct), so
// that the leader records it without reading it back.
func unitDone(point *repo.Point) (queue.UnitDone, error) {
	manifest, err := json.Marshal(point)
	if err != nil {
		return queue.UnitDone{}, fmt.Errorf("point %s's manifest: %w", point.ID, err)
	}
	return queue.UnitDone{Point: point.ID.String(), Manifest: manifest}, nil
}

// eventPatience bounds the recording of one of a unit's events.
const eventPatience = 30 * time.Second

// openRepo is repos.get, abandoned when ctx ends. A worker's first unit
// opens the repository: the password's key derivation and the index's
// load, a second or more on a busy host, which heed no context. A cancel
// or a fence must end the attempt within moments (issue 36: a cancelled
// job's attempts end within 2 s on every worker), so the attempt returns
// at once and the open goes on, to be kept for the worker's next unit (or
// to fail, with ctx, where it heeds it).
func openRepo(ctx context.Context, repos *unitRepos, name string) (*unitRepo, error) {
	type opened struct {
		ur  *unitRepo
		err error
	}
	done := make(chan opened, 1)
	go func() {
		ur, err := repos.get(ctx, name)
		done <- opened{ur, err}
	}()
	select {
	case o := <-done:
		return o.ur, o.err
	case <-ctx.Done():
		return nil, fmt.Errorf("open the repository: %w", context.Cause(ctx))
	}
}

// unitEvents records a unit's events in its job's log, under its task.
type unitEvents struct {
	cat catalog.Catalog
	u   queue.VMUnit
	log *slog.Logger
	// after, if set, is closed once the events before these are written.
	after <-chan struct{}
}

func (e unitEvents) record(ctx context.Context, level, kind, msg string, fields map[string]any) {
	if e.after != nil {
		<-e.after
	}
	if fields == nil {
		fields = map[string]any{}
	}
	fields["worker"], fields["attempt"] = e.u.Worker, e.u.Attempt
	// Fenced by the worker's registration: once it is declared lost or
	// replaced, its unit's log is another attempt's. Recorded even as the
	// unit ends, but never waited on for long: a line of the log must not
	// hold the backup (a lock another process keeps on the job's row).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), eventPatience)
	defer cancel()
	err := e.cat.AddWorkerEvents(ctx, e.u.Worker, e.u.Epoch,
		[]catalog.Event{{JobID: e.u.Job, TaskID: e.u.Task, Level: level, Kind: kind, Message: msg, Fields: fields}})
	if err != nil {
		// The backup goes on: its outcome reaches the leader through the
		// hand-off, which records the task's end.
		e.log.Warn("cannot record a VM unit's event", "job", e.u.Job, "task", e.u.Task, "err", err)
	}
}
