package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/postgres"
	"github.com/coffer-backup/coffer/internal/fleet/queue"
)

// The catalog's rows of a VM unit commit with its River rows: the task's
// start with the grant's job (SubmitVMUnitRecorded), the task's end and
// the point with the job's completion (UnitDone.Commit). These tests use
// the catalog's own statements (postgres.StartTaskTx, EndWorkerUnitTx)
// on a migrated catalog beside River's schema.

// openUnitCatalog migrates the catalog in dsn's database and records a
// backup job with a task per VM, queued.
func openUnitCatalog(t *testing.T, dsn string, vms ...string) (catalog.Catalog, []*catalog.Task) {
	t.Helper()
	ctx := context.Background()
	cat, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.Close() })
	j := &catalog.Job{Kind: "backup", Policy: "p", Status: catalog.StatusRunning}
	if err := cat.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	tasks := make([]*catalog.Task, len(vms))
	for i, vm := range vms {
		tasks[i] = &catalog.Task{JobID: j.ID, Connection: "east", VMID: vm, VMName: vm, Status: catalog.StatusQueued, Mode: "full"}
	}
	if err := cat.CreateTasks(ctx, tasks); err != nil {
		t.Fatal(err)
	}
	return cat, tasks
}

// unitOf is task's attempt granted to worker at epoch.
func unitOf(task *catalog.Task, worker string, epoch int64, attempt int) queue.VMUnit {
	return queue.VMUnit{Policy: "p", Connection: "east", VMID: task.VMID, VMName: task.VMName, Worker: worker, Epoch: epoch,
		Pools: []string{"global", "worker:" + worker}, Job: task.JobID, Task: task.ID, Attempt: attempt}
}

// startRecord is the leader's catalog part of a grant (fleet.UnitRunner's).
func startRecord(u queue.VMUnit) queue.GrantTx {
	return func(ctx context.Context, tx pgx.Tx) error {
		return postgres.StartTaskTx(ctx, tx, u.Job, u.Task, u.Attempt, time.Now())
	}
}

// endOf is the unit's end as a worker commits it (fleet's unitEnd), with
// the point pointID.
func endOf(u queue.VMUnit, pointID string) postgres.UnitEnd {
	return postgres.UnitEnd{Worker: u.Worker, Epoch: u.Epoch,
		Task: catalog.Task{ID: u.Task, JobID: u.Job, Attempts: u.Attempt, FinishedAt: time.Now(), BackupPointID: pointID, Mode: "full"},
		Point: catalog.BackupPoint{Repository: "repo1", ID: pointID, Time: time.Now(), Connection: u.Connection, VMID: u.VMID,
			VMName: u.VMName, Mode: "full", JobID: u.Job}}
}

func taskNow(t *testing.T, cat catalog.Catalog, id int64) catalog.Task {
	t.Helper()
	task, err := cat.GetTask(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func countRows(t *testing.T, pool *pgxpool.Pool, query string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

const (
	unitJobsOfTask = `SELECT count(*) FROM river.river_job WHERE kind = 'coffer_vm_unit' AND (args->>'task')::bigint = $1`
	pointsOfVM     = `SELECT count(*) FROM backup_points WHERE vm_id = $1`
)

// A grant whose transaction fails after River's insert and the task's
// start (a failure injected between them) leaves neither; one that
// commits leaves both; a replay is one job and records nothing again;
// the grant of a task that ended is refused, with no job.
func TestGrantAndTaskStartCommitTogether(t *testing.T) {
	pool, dsn := startCatalog(t)
	cat, tasks := openUnitCatalog(t, dsn, "vm1", "vm2")
	srv := startServer(t, pool) // no worker works w-kvm1: the jobs stay available
	ctx := context.Background()
	u := unitOf(tasks[0], "kvm1", 1, 1)

	injected := errors.New("injected between the inserts")
	_, err := srv.SubmitVMUnitRecorded(ctx, u, func(ctx context.Context, tx pgx.Tx) error {
		if err := startRecord(u)(ctx, tx); err != nil {
			return err
		}
		return injected
	})
	if !errors.Is(err, injected) {
		t.Fatalf("the grant with a failure injected: %v", err)
	}
	if n := countRows(t, pool, unitJobsOfTask, u.Task); n != 0 {
		t.Fatalf("%d River jobs of the failed grant", n)
	}
	if got := taskNow(t, cat, u.Task); got.Status != catalog.StatusQueued || got.Attempts != 0 || !got.StartedAt.IsZero() {
		t.Fatalf("the task after the failed grant: %+v", got)
	}

	s, err := srv.SubmitVMUnitRecorded(ctx, u, startRecord(u))
	if err != nil || s.Duplicate {
		t.Fatalf("the grant: %+v, %v", s, err)
	}
	if n := countRows(t, pool, unitJobsOfTask, u.Task); n != 1 {
		t.Fatalf("%d River jobs of the grant", n)
	}
	if got := taskNow(t, cat, u.Task); got.Status != catalog.StatusRunning || got.Attempts != 1 || got.StartedAt.IsZero() {
		t.Fatalf("the task after the grant: %+v", got)
	}
	again, err := srv.SubmitVMUnitRecorded(ctx, u, startRecord(u))
	if err != nil || !again.Duplicate || again.ID != s.ID {
		t.Fatalf("the grant replayed: %+v, %v (first %d)", again, err, s.ID)
	}

	ended := *tasks[1]
	ended.Status, ended.FinishedAt, ended.Error = catalog.StatusFailed, time.Now(), "gave up"
	if err := cat.UpdateTasks(ctx, []*catalog.Task{&ended}); err != nil {
		t.Fatal(err)
	}
	late := unitOf(tasks[1], "kvm1", 1, 1)
	if _, err := srv.SubmitVMUnitRecorded(ctx, late, startRecord(late)); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("the grant of a task that ended: %v", err)
	}
	if n := countRows(t, pool, unitJobsOfTask, late.Task); n != 0 {
		t.Fatalf("%d River jobs for the task that ended", n)
	}
}

// A unit's point and its task's end commit with its job's completion: a
// commit that fails after writing the point (injected) leaves neither the
// point nor the task's end, and its outcome says so (transient: retried);
// one whose worker was registered again meanwhile is fenced, with
// nothing recorded; one that commits leaves the point current, the task
// ended, and says Recorded.
func TestUnitsEndCommitsWithItsCompletion(t *testing.T) {
	pool, dsn := startCatalog(t)
	cat, tasks := openUnitCatalog(t, dsn, "ok", "broken", "stale")
	ctx := context.Background()
	w, err := cat.RegisterWorker(ctx, catalog.Worker{Name: "kvm1", Protocol: queue.ProtocolVersion, Slots: 2}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, pool)
	injected := errors.New("injected after the point")
	// A unit that runs ends once its submitter watches for its end.
	gate := newWatchGate(srv, make(chan struct{}, 1))
	run := func(ctx context.Context, u queue.VMUnit) (queue.UnitDone, error) {
		select {
		case <-gate.open:
		case <-ctx.Done():
			return queue.UnitDone{}, ctx.Err()
		}
		pointID := "point-of-" + u.VMName
		return queue.UnitDone{Point: pointID, Commit: func(ctx context.Context, tx pgx.Tx) error {
			if err := postgres.EndWorkerUnitTx(ctx, tx, endOf(u, pointID)); err != nil {
				return err
			}
			if u.VMName == "broken" {
				return injected
			}
			return nil
		}}, nil
	}
	dir := filepath.Join(t.TempDir(), "kvm1")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	c, err := queue.NewWorker(pool, queue.Config{Name: "kvm1", ID: "worker-kvm1", Epoch: w.Epoch, Slots: 2,
		Service: workerService(t, dir), VMUnit: run, Logger: quiet})
	startClient(t, c, err)

	// Each outcome comes with its completion's notice (the row not read
	// for it, once the submitter listens, if the unit ran: a fenced one
	// may end before its submitter watches), and is the row's.
	grant := func(task *catalog.Task) *queue.Outcome {
		u := unitOf(task, "kvm1", w.Epoch, 1)
		s, err := srv.SubmitVMUnitRecorded(ctx, u, startRecord(u))
		if err != nil {
			t.Fatal(err)
		}
		o, n := gate.wait(t, srv, s)
		if queue.Heard(s) != 0 && task.VMName != "stale" && n != 0 {
			t.Fatalf("%s's row was read %d times for its outcome", task.VMName, n)
		}
		if row := waitOutcome(t, srv, s.ID, 30*time.Second); !reflect.DeepEqual(row, o) {
			t.Fatalf("%s's outcome: %+v in its notice, %+v in its row", task.VMName, o, row)
		}
		var state string
		if err := pool.QueryRow(ctx, `SELECT state FROM river.river_job WHERE id = $1`, s.ID).Scan(&state); err != nil || state != "completed" {
			t.Fatalf("%s's job: %s, %v", task.VMName, state, err)
		}
		return o
	}

	if o := grant(tasks[0]); o.Err() != nil || !recorded(t, o) {
		t.Fatalf("the unit that commits: %+v", o)
	}
	if got := taskNow(t, cat, tasks[0].ID); got.Status != catalog.StatusSuccess || got.BackupPointID != "point-of-ok" || got.FinishedAt.IsZero() {
		t.Fatalf("its task: %+v", got)
	}
	if n := countRows(t, pool, pointsOfVM, "ok"); n != 1 {
		t.Fatalf("%d points of the unit that commits", n)
	}

	if o := grant(tasks[1]); o.Err() == nil || o.Fenced || !o.Transient || recorded(t, o) {
		t.Fatalf("the unit whose commit fails after its point: %+v", o)
	}
	if n := countRows(t, pool, pointsOfVM, "broken"); n != 0 {
		t.Fatalf("%d points of the unit whose commit failed", n)
	}
	if got := taskNow(t, cat, tasks[1].ID); got.Status != catalog.StatusRunning || got.BackupPointID != "" {
		t.Fatalf("the task whose commit failed: %+v", got)
	}

	// Registered again: the process at the old epoch is fenced.
	if _, err := cat.RegisterWorker(ctx, catalog.Worker{Name: "kvm1", Protocol: queue.ProtocolVersion, Slots: 2}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if o := grant(tasks[2]); !o.Fenced || recorded(t, o) {
		t.Fatalf("the unit of a stale epoch: %+v", o)
	}
	if n := countRows(t, pool, pointsOfVM, "stale"); n != 0 {
		t.Fatalf("%d points of the fenced unit", n)
	}
	if got := taskNow(t, cat, tasks[2].ID); got.Status != catalog.StatusRunning {
		t.Fatalf("the fenced unit's task: %+v", got)
	}
}

// recorded says whether the outcome's document says the worker recorded
// the point.
func recorded(t *testing.T, o *queue.Outcome) bool {
	t.Helper()
	if len(o.Document) == 0 {
		return false
	}
	var d queue.UnitDone
	if err := json.Unmarshal(o.Document, &d); err != nil {
		t.Fatal(err)
	}
	return d.Recorded
}
