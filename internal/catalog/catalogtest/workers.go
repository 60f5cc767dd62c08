package catalogtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/coffer-backup/coffer/internal/catalog"
)

func wantFenced(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, catalog.ErrFenced) {
		t.Fatalf("%s: got %v, want an error wrapping catalog.ErrFenced", what, err)
	}
}

// testWorkers: a registration raises the epoch and fences the one
// before; states only move forward; the stale are declared lost once and
// stay fenced until they register again.
func testWorkers(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	reach := catalog.WorkerReach{Connections: []string{"kvm"}, Hosts: []string{"kvm1"}, Datastores: []string{"ds1"},
		Libraries: []string{"lib"}, Repositories: []string{"main"}, CanBoot: true}
	w, err := c.RegisterWorker(ctx, catalog.Worker{Name: "kvm1", Host: "kvm1.example", Version: "1.2.3", Protocol: 1,
		Reach: reach, Slots: 4, State: catalog.WorkerReady}, at(0))
	ok(t, err)
	same(t, "registered", w, catalog.Worker{Name: "kvm1", Epoch: 1, Host: "kvm1.example", Version: "1.2.3", Protocol: 1,
		Reach: reach, Slots: 4, State: catalog.WorkerStarting, HeartbeatAt: at(0), RegisteredAt: at(0)})
	if _, err := c.RegisterWorker(ctx, catalog.Worker{Name: "x"}, at(0)); err == nil {
		t.Fatal("a worker without slots was registered")
	}

	w, err = c.HeartbeatWorker(ctx, "kvm1", 1, at(5*time.Second))
	ok(t, err)
	if !w.HeartbeatAt.Equal(at(5*time.Second)) || w.Epoch != 1 {
		t.Fatalf("heartbeat: %+v", w)
	}
	w, err = c.RegisterWorker(ctx, catalog.Worker{Name: "kvm1", Host: "kvm1b", Protocol: 1, Slots: 2}, at(6*time.Second))
	ok(t, err)
	if w.Epoch != 2 || w.Host != "kvm1b" || w.Slots != 2 || w.Reach.CanBoot || !w.RegisteredAt.Equal(at(6*time.Second)) {
		t.Fatalf("registration again: %+v", w)
	}
	_, err = c.HeartbeatWorker(ctx, "kvm1", 1, at(7*time.Second))
	wantFenced(t, "heartbeat of the registration before", err)
	_, err = c.SetWorkerState(ctx, "kvm1", 1, catalog.WorkerReady)
	wantFenced(t, "state set by the registration before", err)
	wantFenced(t, "deregistration by the registration before", c.DeregisterWorker(ctx, "kvm1", 1))
	_, err = c.HeartbeatWorker(ctx, "nobody", 1, at(7*time.Second))
	wantFenced(t, "heartbeat of a worker never registered", err)

	w, err = c.SetWorkerState(ctx, "kvm1", 2, catalog.WorkerReady)
	ok(t, err)
	same(t, "ready", w.State, catalog.WorkerReady)
	w, err = c.SetWorkerState(ctx, "kvm1", 0, catalog.WorkerDraining) // an operator's drain: any epoch
	ok(t, err)
	same(t, "drained", w.State, catalog.WorkerDraining)
	w, err = c.SetWorkerState(ctx, "kvm1", 2, catalog.WorkerReady)
	ok(t, err)
	same(t, "ready after a drain", w.State, catalog.WorkerDraining)
	w, err = c.HeartbeatWorker(ctx, "kvm1", 2, at(8*time.Second))
	ok(t, err)
	same(t, "the state a heartbeat reads", w.State, catalog.WorkerDraining)
	if _, err := c.SetWorkerState(ctx, "kvm1", 2, catalog.WorkerLost); err == nil {
		t.Fatal("a worker was set lost by hand")
	}
	_, err = c.SetWorkerState(ctx, "nobody", 0, catalog.WorkerDraining)
	wantNotFound(t, "drain of a worker never registered", err)
	checkWorkersLost(t, c)
}

// checkWorkersLost goes on from testWorkers: kvm1 (epoch 2, draining)
// last renewed at 8 s.
func checkWorkersLost(t *testing.T, c catalog.Catalog) {
	ctx := context.Background()
	_, err := c.RegisterWorker(ctx, catalog.Worker{Name: "esx", Protocol: 1, Slots: 8}, at(20*time.Second))
	ok(t, err)
	lost, err := c.DeclareWorkersLost(ctx, at(10*time.Second))
	ok(t, err)
	if len(lost) != 1 || lost[0].Name != "kvm1" || lost[0].State != catalog.WorkerLost || lost[0].Epoch != 2 {
		t.Fatalf("declared lost: %+v", lost)
	}
	lost, err = c.DeclareWorkersLost(ctx, at(10*time.Second))
	ok(t, err)
	same(t, "declared lost again", len(lost), 0)
	_, err = c.HeartbeatWorker(ctx, "kvm1", 2, at(21*time.Second))
	wantFenced(t, "heartbeat of a lost worker", err)
	_, err = c.SetWorkerState(ctx, "kvm1", 0, catalog.WorkerDraining)
	wantFenced(t, "drain of a lost worker", err)
	wantFenced(t, "deregistration of a lost worker", c.DeregisterWorker(ctx, "kvm1", 2))

	ws, err := c.ListWorkers(ctx)
	ok(t, err)
	if len(ws) != 2 || ws[0].Name != "esx" || ws[1].Name != "kvm1" || ws[1].State != catalog.WorkerLost {
		t.Fatalf("list: %+v", ws)
	}
	w, err := c.RegisterWorker(ctx, catalog.Worker{Name: "kvm1", Protocol: 1, Slots: 2}, at(30*time.Second))
	ok(t, err)
	if w.Epoch != 3 || w.State != catalog.WorkerStarting {
		t.Fatalf("return of a lost worker: %+v", w)
	}
	ok(t, c.DeregisterWorker(ctx, "kvm1", 3))
	ws, err = c.ListWorkers(ctx)
	ok(t, err)
	if len(ws) != 1 || ws[0].Name != "esx" {
		t.Fatalf("list after deregistration: %+v", ws)
	}
}

// testConcurrentWorkerLoss: servers declaring at once each get a
// different share of the lost workers, together all of them; a heartbeat
// racing the declaration either renews (and the worker is not lost) or is
// fenced (and the worker is), never both.
func testConcurrentWorkerLoss(t *testing.T, open Opener) {
	const handles, workers = 4, 20
	ctx := context.Background()
	cats := make([]catalog.Catalog, handles)
	for i := range cats {
		cats[i] = mustOpen(t, open)
	}
	for round := range 3 {
		t0 := at(time.Duration(round) * time.Hour)
		epochs := map[string]int64{}
		for i := range workers {
			w, err := cats[0].RegisterWorker(ctx, catalog.Worker{Name: fmt.Sprintf("w%d", i), Protocol: 1, Slots: 1}, t0)
			ok(t, err)
			epochs[w.Name] = w.Epoch
		}
		var mu sync.Mutex
		lostBy := map[string]int{}
		renewed := map[string]bool{}
		g, gctx := errgroup.WithContext(ctx)
		for h := range handles {
			g.Go(func() error {
				lost, err := cats[h].DeclareWorkersLost(gctx, t0.Add(time.Minute))
				mu.Lock()
				defer mu.Unlock()
				for _, w := range lost {
					lostBy[w.Name]++
				}
				return err
			})
		}
		g.Go(func() error { // the workers renew late, during the declarations
			for name, epoch := range epochs {
				_, err := cats[1].HeartbeatWorker(gctx, name, epoch, t0.Add(2*time.Minute))
				if err != nil && !errors.Is(err, catalog.ErrFenced) {
					return err
				}
				mu.Lock()
				renewed[name] = err == nil
				mu.Unlock()
			}
			return nil
		})
		ok(t, g.Wait())
		for name := range epochs {
			if n := lostBy[name]; n > 1 || (n == 1) == renewed[name] {
				t.Fatalf("round %d: worker %s declared lost %d times, renewed: %v", round, name, n, renewed[name])
			}
		}
	}
}
