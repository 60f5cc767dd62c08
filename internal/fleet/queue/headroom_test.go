package queue_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/fleet/queue"
)

// TestWorkerAnswersWhileItsSlotsAreFull: a worker whose two slots run
// units that do not end still runs the operations sent to it by name (a
// repository's creation and listing here; a connection's VMs, a restore
// in production), rather than holding them until a backup ends.
func TestWorkerAnswersWhileItsSlotsAreFull(t *testing.T) {
	pool, _ := startCatalog(t)
	srv := startServer(t, pool)
	release := make(chan struct{})
	defer close(release)
	var running atomic.Int32
	run := func(ctx context.Context, u queue.VMUnit) (queue.UnitDone, error) {
		running.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return queue.UnitDone{Point: "point-of-" + u.VMName}, nil
	}
	dir := filepath.Join(t.TempDir(), "kvm1")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	c, err := queue.NewWorker(pool, queue.Config{Name: "kvm1", ID: "worker-kvm1", Epoch: 1, Slots: 2, Service: workerService(t, dir),
		VMUnit: run, Logger: quiet})
	startClient(t, c, err)

	ctx := context.Background()
	for i := range 2 {
		vm := fmt.Sprintf("vm%d", i)
		if _, err := srv.SubmitVMUnit(ctx, queue.VMUnit{Policy: "p", Connection: "east", VMID: vm, VMName: vm, Worker: "kvm1", Epoch: 1,
			Pools: []string{"global", "worker:kvm1"}, Job: 1, Task: int64(i + 1), Attempt: 1}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "both slots run a unit", func() bool { return running.Load() == 2 })
	for _, op := range []struct {
		id string
		in any
	}{{"init-repository", &api.InitRepositoryInput{}}, {"list-points", &api.ListPointsInput{}}} {
		s, err := srv.Submit(ctx, queue.Unit{Worker: "kvm1", Epoch: 1, Operation: op.id, Input: op.in})
		if err != nil {
			t.Fatal(err)
		}
		if o := waitOutcome(t, srv, s.ID, 30*time.Second); o.Err() != nil || o.Worker != "kvm1" {
			t.Fatalf("%s on a worker with its slots full: %+v", op.id, o)
		}
	}
	if n := running.Load(); n != 2 {
		t.Fatalf("%d units ran, want the two", n)
	}
}
