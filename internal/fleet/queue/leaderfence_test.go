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

// A VM unit granted under an epoch of the schedules lease that is no
// longer the lease's (a leader that froze and woke after another took
// over) completes as fenced without running; one of the current epoch
// runs. The units not finished are listed with their pools, whoever
// granted them, for the leader that takes over.
func TestStaleLeadersUnitIsFenced(t *testing.T) {
	pool, _ := startCatalog(t)
	srv := startServer(t, pool)
	var lease atomic.Int64
	lease.Store(2)
	leaderFence := func(_ context.Context, epoch int64) error {
		if epoch != lease.Load() {
			return errors.New("a stale leader's unit")
		}
		return nil
	}
	var mu sync.Mutex
	var ran []string
	release := make(chan struct{})
	run := func(ctx context.Context, u queue.VMUnit) (queue.UnitDone, error) {
		mu.Lock()
		ran = append(ran, u.VMName)
		mu.Unlock()
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
		VMUnit: run, LeaderFence: leaderFence, Logger: quiet})
	startClient(t, c, err)

	ctx := context.Background()
	unit := func(vm string, leaderEpoch int64, task int64) queue.VMUnit {
		return queue.VMUnit{Policy: "p", Connection: "east", VMID: vm, VMName: vm, Worker: "kvm1", Epoch: 1, LeaderEpoch: leaderEpoch,
			Pools: []string{"global", "policy:p", "worker:kvm1"}, Job: 1, Task: task, Attempt: 1}
	}
	current, err := srv.SubmitVMUnit(ctx, unit("current", 2, 1))
	if err != nil {
		t.Fatal(err)
	}
	// The current unit runs (and waits for release): it is listed, with
	// its pools, for a leader taking over.
	waitFor(t, "the current leader's unit starts", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(ran, "current")
	})
	units, err := srv.UnfinishedVMUnits(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(units) != 1 || units[0].ID != current.ID || !slices.Equal(units[0].Unit.Pools, []string{"global", "policy:p", "worker:kvm1"}) ||
		units[0].Unit.LeaderEpoch != 2 {
		t.Fatalf("unfinished units %+v, want the running one with its pools", units)
	}
	stale, err := srv.SubmitVMUnit(ctx, unit("stale", 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	out := waitOutcome(t, srv, stale.ID, 30*time.Second)
	if !out.Fenced || out.Err() == nil {
		t.Fatalf("the stale leader's unit: %+v, want fenced", out)
	}
	close(release)
	out = waitOutcome(t, srv, current.ID, 30*time.Second)
	var done queue.UnitDone
	if err := out.Err(); err != nil || json.Unmarshal(out.Document, &done) != nil || done.Point != "point-of-current" {
		t.Fatalf("the current leader's unit: %+v, %v", out, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(ran, []string{"current"}) {
		t.Fatalf("units run %v: the stale one ran", ran)
	}
	if units, err := srv.UnfinishedVMUnits(ctx); err != nil || len(units) != 0 {
		t.Fatalf("unfinished units once all ended: %+v, %v", units, err)
	}
}

// waitFor polls cond until it holds, for at most 30 s (a hang).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s", what)
		}
		time.Sleep(10 * time.Millisecond) // a poll's pace, not a synchronisation
	}
}
