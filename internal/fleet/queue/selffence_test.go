package queue_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/fleet/queue"
)

// A VM unit cut short because its worker fenced itself while it ran (a
// heartbeat it could not renew in time, on a loaded host) comes back
// fenced, so that the leader retries it, not as the VM's failure: the
// cause of TestCancelAcrossThreeWorkers's flake (a task of the cancelled
// job recorded failed). A unit that fails on a worker still registered
// comes back as its failure.
func TestUnitCutByItsWorkersFenceComesBackFenced(t *testing.T) {
	pool, _ := startCatalog(t)
	srv := startServer(t, pool)
	var fenced atomic.Bool
	fence := func(_ context.Context, worker string, epoch int64) error {
		if fenced.Load() {
			return fmt.Errorf("worker %s fenced itself: no heartbeat renewed", worker)
		}
		return nil
	}
	// The unit "cut" is running when its worker fences itself; the
	// worker's fence cancels it, and it returns what a cancelled backup
	// returns. The unit "bad" fails on its own.
	run := func(_ context.Context, u queue.VMUnit) (queue.UnitDone, error) {
		if u.VMName == "cut" {
			fenced.Store(true)
			return queue.UnitDone{}, fmt.Errorf("open the repository: %w", context.Canceled)
		}
		return queue.UnitDone{}, errors.New("the VM's disk is unreadable")
	}
	dir := filepath.Join(t.TempDir(), "kvm1")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	c, err := queue.NewWorker(pool, queue.Config{Name: "kvm1", ID: "worker-kvm1", Epoch: 1, Slots: 1, Service: workerService(t, dir),
		VMUnit: run, Fence: fence, Logger: quiet})
	startClient(t, c, err)
	unit := func(vm string, task int64) queue.VMUnit {
		return queue.VMUnit{Policy: "p", Connection: "east", VMID: vm, VMName: vm, Worker: "kvm1", Epoch: 1, Job: 1, Task: task, Attempt: 1}
	}
	ctx := context.Background()

	bad, err := srv.SubmitVMUnit(ctx, unit("bad", 1))
	if err != nil {
		t.Fatal(err)
	}
	if out := waitOutcome(t, srv, bad.ID, 30*time.Second); out.Fenced || out.Err() == nil {
		t.Fatalf("a unit failed on a registered worker: %+v, want its failure, not fenced", out)
	}
	cut, err := srv.SubmitVMUnit(ctx, unit("cut", 2))
	if err != nil {
		t.Fatal(err)
	}
	if out := waitOutcome(t, srv, cut.ID, 30*time.Second); !out.Fenced || out.Err() == nil {
		t.Fatalf("a unit cut by its worker's fence: %+v, want fenced", out)
	}
}

// An operation handed to a worker (coffer_operation) that is cut short
// because its worker fenced itself while it ran (the fence ends the
// worker's queue, and with it the operations' contexts) comes back
// fenced, as a VM unit does, not as a cancel the caller never asked for.
func TestOperationCutByItsWorkersFenceComesBackFenced(t *testing.T) {
	pool, _ := startCatalog(t)
	srv := startServer(t, pool)
	var fenced atomic.Bool
	fence := func(_ context.Context, worker string, _ int64) error {
		if fenced.Load() {
			return fmt.Errorf("worker %s fenced itself: no heartbeat renewed", worker)
		}
		return nil
	}
	dir := filepath.Join(t.TempDir(), "kvm1")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	c, err := queue.NewWorker(pool, queue.Config{Name: "kvm1", ID: "worker-kvm1", Epoch: 1, Slots: 1, Service: workerService(t, dir),
		Fence: fence, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	// The worker's queue runs under the context its fence ends (fleet's
	// queueWork under the member's).
	work, fenceNow := context.WithCancel(context.Background())
	if err := c.Start(work); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Stop(ctx)
	})
	in := &sleepInput{}
	in.Body.Tag, in.Body.Seconds = "cut", 3600
	s, err := srv.Submit(context.Background(), queue.Unit{Worker: "kvm1", Epoch: 1, Operation: "test-sleep", Input: in})
	if err != nil {
		t.Fatal(err)
	}
	if tag := <-sleepStarted; tag != "cut" {
		t.Fatalf("started %q", tag)
	}
	fenced.Store(true)
	fenceNow()
	if out := waitOutcome(t, srv, s.ID, 30*time.Second); !out.Fenced || out.Err() == nil {
		t.Fatalf("an operation cut by its worker's fence: %+v, want fenced", out)
	}
}
