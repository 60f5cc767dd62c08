package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/fleet/queue"
)

// A batch handed to a worker runs there whole and comes back with an
// outcome per VM; while it runs it is listed, with its pools, for a
// leader taking over; a replay of its grant is a duplicate; a batch for
// another epoch of the worker, or of a stale leader, completes as fenced
// without running.
func TestBatchRunsWholeOnItsWorker(t *testing.T) {
	pool, _ := startCatalog(t)
	srv := startServer(t, pool)
	leaderFence := func(_ context.Context, epoch int64) error {
		if epoch != 2 {
			return errors.New("a stale leader's batch")
		}
		return nil
	}
	var mu sync.Mutex
	var ran []string
	release := make(chan struct{})
	run := func(ctx context.Context, b queue.Batch) queue.BatchDone {
		mu.Lock()
		ran = append(ran, b.Datastore)
		mu.Unlock()
		select {
		case <-release:
		case <-ctx.Done():
		}
		return batchOutcome(b)
	}
	dir := filepath.Join(t.TempDir(), "kvm1")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	c, err := queue.NewWorker(pool, queue.Config{Name: "kvm1", ID: "worker-kvm1", Epoch: 1, Slots: 2, Service: workerService(t, dir),
		Batch: run, LeaderFence: leaderFence, Logger: quiet})
	startClient(t, c, err)

	ctx := context.Background()
	pools := []string{"global", "global", "datastore:array/ds-001", "datastore:array/ds-001", "worker:kvm1"}
	batch := func(ds string, epoch, leaderEpoch int64) queue.Batch {
		return queue.Batch{Policy: "p", Connection: "array", Datastore: ds, Reads: 2, Worker: "kvm1", Epoch: epoch, LeaderEpoch: leaderEpoch,
			Pools: pools, Job: 1, VMs: []queue.BatchVM{{Task: 1, Attempt: 1, VMID: "a", VMName: "good"}, {Task: 2, Attempt: 1, VMID: "b", VMName: "bad"}}}
	}
	current, err := srv.SubmitBatch(ctx, batch("ds-001", 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the batch starts", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(ran, "ds-001")
	})
	units, err := srv.UnfinishedVMUnits(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(units) != 1 || units[0].ID != current.ID || !slices.Equal(units[0].Unit.Pools, pools) || units[0].Unit.Worker != "kvm1" ||
		units[0].Unit.VMID != "" {
		t.Fatalf("unfinished units %+v, want the running batch with its pools and no VM", units)
	}
	if again, err := srv.SubmitBatch(ctx, batch("ds-001", 1, 2)); err != nil || !again.Duplicate || again.ID != current.ID {
		t.Fatalf("the grant replayed: %+v, %v, want a duplicate of %d", again, err, current.ID)
	}
	for _, stale := range []queue.Batch{batch("ds-stale-worker", 7, 2), batch("ds-stale-leader", 1, 1)} {
		stale.Job = 2
		sub, err := srv.SubmitBatch(ctx, stale)
		if err != nil {
			t.Fatal(err)
		}
		if out := waitOutcome(t, srv, sub.ID, 30*time.Second); !out.Fenced || out.Err() == nil {
			t.Fatalf("the batch of %s: %+v, want fenced", stale.Datastore, out)
		}
	}
	close(release)
	out := waitOutcome(t, srv, current.ID, 30*time.Second)
	var done queue.BatchDone
	if err := out.Err(); err != nil || json.Unmarshal(out.Document, &done) != nil || len(done.VMs) != 2 {
		t.Fatalf("the batch: %+v, %v", out, err)
	}
	if vm := done.VMs[0]; vm.Task != 1 || vm.Point != "point-of-good" || vm.Error != "" {
		t.Errorf("the good VM's outcome: %+v", vm)
	}
	if vm := done.VMs[1]; vm.Task != 2 || vm.Point != "" || vm.Error != "read failed" || !vm.Transient {
		t.Errorf("the bad VM's outcome: %+v", vm)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(ran, []string{"ds-001"}) {
		t.Fatalf("batches run %v: a fenced one ran", ran)
	}
}

// batchOutcome is a batch's outcome in which the VM named bad fails
// transiently and every other has a point.
func batchOutcome(b queue.Batch) queue.BatchDone {
	var out queue.BatchDone
	for _, vm := range b.VMs {
		if vm.VMName == "bad" {
			out.VMs = append(out.VMs, queue.VMError(vm.Task, errors.New("read failed"), true))
			continue
		}
		out.VMs = append(out.VMs, queue.BatchVMDone{Task: vm.Task, UnitDone: queue.UnitDone{Point: "point-of-" + vm.VMName}})
	}
	return out
}

// A batch whose context ends while its worker is fenced (it could not
// renew in time, and fenced itself) comes back fenced, so that the leader
// runs it again, and not as cancelled, which would fail its VMs.
func TestBatchOfAWorkerThatFencedItselfComesBackFenced(t *testing.T) {
	pool, _ := startCatalog(t)
	srv := startServer(t, pool)
	var fenced atomic.Bool
	fence := func(context.Context, string, int64) error {
		if fenced.Load() {
			return errors.New("fenced: no renewal for half the dead interval")
		}
		return nil
	}
	started := make(chan struct{})
	run := func(ctx context.Context, b queue.Batch) queue.BatchDone {
		close(started)
		<-ctx.Done()
		return batchOutcome(b)
	}
	dir := filepath.Join(t.TempDir(), "kvm1")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	c, err := queue.NewWorker(pool, queue.Config{Name: "kvm1", ID: "worker-kvm1", Epoch: 1, Slots: 2, Service: workerService(t, dir),
		Batch: run, Fence: fence, Logger: quiet})
	startClient(t, c, err)
	ctx := context.Background()
	sub, err := srv.SubmitBatch(ctx, queue.Batch{Policy: "p", Connection: "array", Datastore: "ds-001", Worker: "kvm1", Epoch: 1, Job: 1,
		VMs: []queue.BatchVM{{Task: 1, Attempt: 1, VMID: "a", VMName: "good"}}})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	fenced.Store(true)
	if err := srv.Cancel(ctx, sub.ID); err != nil { // the member's fence ends the work's context
		t.Fatal(err)
	}
	if out := waitOutcome(t, srv, sub.ID, 30*time.Second); !out.Fenced || out.Document != nil || out.ErrorClass != "" {
		t.Fatalf("the batch of a worker that fenced itself: %+v, want fenced, no outcome per VM", out)
	}
}
