package queue_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/postgres"
	"github.com/coffer-backup/coffer/internal/fleet/queue"
)

// envHang makes a unit worker process stop inside its completion's
// transaction, once its point is written, until it is killed.
const envHang = "COFFER_QUEUE_TEST_HANG"

// TestUnitWorkerProcess is worker "u" in a process of its own (only when
// started by startUnitWorkerProcess): its VM units commit their point and
// task's end with their completion, and with envHang set it says "point
// written" inside that transaction and waits to be killed.
func TestUnitWorkerProcess(t *testing.T) {
	if !inWorkerProcess() {
		t.Skip("run by TestWorkerKilledBetweenPointAndCompletion as a worker process")
	}
	epoch, _ := strconv.ParseInt(os.Getenv(envEpoch), 10, 64)
	pool, err := pgxpool.New(context.Background(), os.Getenv(envDSN))
	if err != nil {
		t.Fatal(err)
	}
	hang := os.Getenv(envHang) != ""
	run := func(_ context.Context, u queue.VMUnit) (queue.UnitDone, error) {
		pointID := fmt.Sprintf("point-of-attempt-%d", u.Attempt)
		return queue.UnitDone{Point: pointID, Commit: func(ctx context.Context, tx pgx.Tx) error {
			if err := postgres.EndWorkerUnitTx(ctx, tx, endOf(u, pointID)); err != nil {
				return err
			}
			if hang {
				fmt.Println("point written")
				select {}
			}
			return nil
		}}, nil
	}
	c, err := queue.NewWorker(pool, queue.Config{Name: "u", ID: fmt.Sprintf("worker-u-%d", epoch), Epoch: epoch, Slots: 1,
		Service: workerService(t, os.Getenv(envDir)), VMUnit: run, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	select {}
}

func startUnitWorkerProcess(t *testing.T, dsn string, epoch int64, hang bool) *workerProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestUnitWorkerProcess$", "-test.v")
	cmd.Env = append(os.Environ(), envDSN+"="+dsn, envEpoch+"="+strconv.FormatInt(epoch, 10), envDir+"="+t.TempDir())
	if hang {
		cmd.Env = append(cmd.Env, envHang+"=1")
	}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return startProcess(t, cmd)
}

// A worker killed -9 after its completion's transaction wrote the point
// and the task's end, before it completed the job, leaves none of them:
// no point in the catalog, the task running, the job running (River's
// rescuer's, as any killed worker's). The retry, at the worker's next
// registration, records exactly one point, its own.
func TestWorkerKilledBetweenPointAndCompletion(t *testing.T) {
	pool, dsn := startCatalog(t)
	cat, tasks := openUnitCatalog(t, dsn, "vm1")
	srv := startServer(t, pool)
	ctx := context.Background()
	register := func() int64 {
		w, err := cat.RegisterWorker(ctx, catalog.Worker{Name: "u", Protocol: queue.ProtocolVersion, Slots: 1}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return w.Epoch
	}

	epoch := register()
	first := startUnitWorkerProcess(t, dsn, epoch, true)
	lost := unitOf(tasks[0], "u", epoch, 1)
	s, err := srv.SubmitVMUnitRecorded(ctx, lost, startRecord(lost))
	if err != nil {
		t.Fatal(err)
	}
	first.expect(t, "point written")
	first.kill()

	if n := countRows(t, pool, pointsOfVM, "vm1"); n != 0 {
		t.Fatalf("%d points after the kill", n)
	}
	if got := taskNow(t, cat, lost.Task); got.Status != catalog.StatusRunning || got.BackupPointID != "" || got.Attempts != 1 {
		t.Fatalf("the task after the kill: %+v", got)
	}
	var state string
	if err := pool.QueryRow(ctx, `SELECT state FROM river.river_job WHERE id = $1`, s.ID).Scan(&state); err != nil || state != "running" {
		t.Fatalf("the killed attempt's job: %s, %v", state, err)
	}

	epoch = register()
	startUnitWorkerProcess(t, dsn, epoch, false)
	retry := unitOf(tasks[0], "u", epoch, 2)
	r, err := srv.SubmitVMUnitRecorded(ctx, retry, startRecord(retry))
	if err != nil {
		t.Fatal(err)
	}
	if o := waitOutcome(t, srv, r.ID, 30*time.Second); o.Err() != nil || !recorded(t, o) {
		t.Fatalf("the retry: %+v", o)
	}
	if n := countRows(t, pool, pointsOfVM, "vm1"); n != 1 {
		t.Fatalf("%d points after the retry, want 1", n)
	}
	got := taskNow(t, cat, retry.Task)
	if got.Status != catalog.StatusSuccess || got.BackupPointID != "point-of-attempt-2" || got.Attempts != 2 {
		t.Fatalf("the task after the retry: %+v", got)
	}
}
