package queue_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/postgres"
	"github.com/coffer-backup/coffer/internal/fleet/queue"
)

// gate stops a unit's completion transaction at a point: reached is
// closed there, and it goes on once open is closed.
type gate struct{ reached, open chan struct{} }

func newGate() gate { return gate{make(chan struct{}), make(chan struct{})} }

func (g gate) pass() {
	close(g.reached)
	<-g.open
}

// A resumed run settles the interrupted run's task of a VM
// (SupersedeTask) while that run's unit may still end on a worker, and
// exactly one of the two wins, whatever their order: the unit that
// committed gives its point, which the resumed run takes; a unit ending
// after the settlement is fenced, with no point in the catalog; and a
// settlement that comes while the unit's completion transaction has
// written its point and not committed waits for that commit (the task's
// row lock), then gives the point. The completion is stopped at those
// instants by a gate in its transaction, not timed.
func TestSupersedeAndAUnitsEndNeverBothWin(t *testing.T) {
	pool, dsn := startCatalog(t)
	cat, tasks := openUnitCatalog(t, dsn, "committed", "settled", "raced")
	ctx := context.Background()
	w, err := cat.RegisterWorker(ctx, catalog.Worker{Name: "kvm1", Protocol: queue.ProtocolVersion, Slots: 2}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, pool)
	before, after := map[string]gate{"settled": newGate()}, map[string]gate{"raced": newGate()}
	startGatedWorker(t, pool, w.Epoch, before, after)
	grant := func(task *catalog.Task) queue.Submitted {
		u := unitOf(task, "kvm1", w.Epoch, 1)
		s, err := srv.SubmitVMUnitRecorded(ctx, u, startRecord(u))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	supersede := func(task *catalog.Task) string {
		point, err := cat.SupersedeTask(ctx, task.JobID, task.Connection, task.VMID, "interrupted: job 99 carries the run on")
		if err != nil {
			t.Fatal(err)
		}
		return point
	}

	// The unit commits first: its point is the VM's.
	o := waitOutcome(t, srv, grant(tasks[0]).ID, 30*time.Second)
	if o.Err() != nil || !recorded(t, o) {
		t.Fatalf("the unit that commits: %+v", o)
	}
	if p := supersede(tasks[0]); p != "point-of-committed" {
		t.Fatalf("settled after its unit committed: point %q", p)
	}
	if got := taskNow(t, cat, tasks[0].ID); got.Status != catalog.StatusSuccess || got.BackupPointID != "point-of-committed" {
		t.Fatalf("its task after the settlement: %+v", got)
	}

	// Settled first, while the unit runs: the unit's end is fenced.
	s := grant(tasks[1])
	<-before["settled"].reached
	if p := supersede(tasks[1]); p != "" {
		t.Fatalf("settled while its unit ran: point %q", p)
	}
	close(before["settled"].open)
	if o := waitOutcome(t, srv, s.ID, 30*time.Second); !o.Fenced || recorded(t, o) {
		t.Fatalf("the unit that ended after the settlement: %+v", o)
	}
	if n := countRows(t, pool, pointsOfVM, "settled"); n != 0 {
		t.Fatalf("%d points of the unit that ended after the settlement", n)
	}
	if got := taskNow(t, cat, tasks[1].ID); got.Status != catalog.StatusCancelled {
		t.Fatalf("the settled task: %+v", got)
	}

	// The settlement comes between the unit's point and its commit.
	s = grant(tasks[2])
	<-after["raced"].reached
	settled := make(chan string, 1)
	go func() {
		p, err := cat.SupersedeTask(ctx, tasks[2].JobID, tasks[2].Connection, tasks[2].VMID, "interrupted: job 99 carries the run on")
		if err != nil {
			t.Error(err)
		}
		settled <- p
	}()
	waitForLockWait(t, pool, "UPDATE tasks SET status")
	close(after["raced"].open)
	if o := waitOutcome(t, srv, s.ID, 30*time.Second); o.Err() != nil || !recorded(t, o) {
		t.Fatalf("the unit whose commit the settlement waited for: %+v", o)
	}
	if p := <-settled; p != "point-of-raced" {
		t.Fatalf("the settlement that waited for the unit's commit: point %q", p)
	}
	if n := countRows(t, pool, pointsOfVM, "raced"); n != 1 {
		t.Fatalf("%d points of the raced unit, want 1", n)
	}
}

// startGatedWorker starts worker kvm1 at epoch: its units end with
// their point (EndWorkerUnitTx) in their completion's transaction, that
// of a VM in before stopped at its gate before the point, in after once
// the point is written.
func startGatedWorker(t *testing.T, pool *pgxpool.Pool, epoch int64, before, after map[string]gate) {
	t.Helper()
	run := func(_ context.Context, u queue.VMUnit) (queue.UnitDone, error) {
		pointID := "point-of-" + u.VMName
		return queue.UnitDone{Point: pointID, Commit: func(ctx context.Context, tx pgx.Tx) error {
			if g, ok := before[u.VMName]; ok {
				g.pass()
			}
			if err := postgres.EndWorkerUnitTx(ctx, tx, endOf(u, pointID)); err != nil {
				return err
			}
			if g, ok := after[u.VMName]; ok {
				g.pass()
			}
			return nil
		}}, nil
	}
	dir := filepath.Join(t.TempDir(), "kvm1")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	c, err := queue.NewWorker(pool, queue.Config{Name: "kvm1", ID: "worker-kvm1", Epoch: epoch, Slots: 2,
		Service: workerService(t, dir), VMUnit: run, Logger: quiet})
	startClient(t, c, err)
}

// waitForLockWait waits until a session runs a statement starting with
// prefix and waits for a lock (pg_stat_activity): the moment the test's
// order needs, observed, not timed.
func waitForLockWait(t *testing.T, pool *pgxpool.Pool, prefix string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := countRows(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND ltrim(query) LIKE $1`, prefix+"%")
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session waits for a lock in %q", prefix)
		}
		time.Sleep(5 * time.Millisecond) // a poll's pace, not a synchronisation
	}
}
