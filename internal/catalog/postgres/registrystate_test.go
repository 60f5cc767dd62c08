package postgres_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/postgres"
	"github.com/coffer-backup/coffer/internal/fleet"
)

// A worker logged in with its own role reads only its own registry row,
// yet fleet.OwnerGone must tell it the truth about another registration
// (whose coffer snapshot it found on a VM): alive while ready, dead once
// lost, replaced or gone. Listing the registry, it took every other
// worker for dead.
func TestOwnerGoneThroughAWorkersRole(t *testing.T) {
	ctx := context.Background()
	dsn, c, creds := workerCatalog(t)
	now := time.Now()
	register := func(name string) catalog.Worker {
		w, err := c.RegisterWorker(ctx, catalog.Worker{Name: name, Protocol: 1, Slots: 1}, now)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	kvm1, kvm2 := register("kvm1"), register("kvm2")
	if err := creds.SetWorkerCredential(ctx, "kvm1", secret1); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("coffer_worker_kvm1", secret1)
	asKVM1, err := postgres.OpenChecked(ctx, u.String(), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer asKVM1.Close()
	if ws, err := asKVM1.ListWorkers(ctx); err != nil || len(ws) != 1 {
		t.Fatalf("the worker's role lists %d registry rows (%v): the test needs its row-level security", len(ws), err)
	}
	gone := fleet.OwnerGone(asKVM1)
	check := func(what string, w catalog.Worker, want bool) {
		t.Helper()
		got, err := gone(ctx, fleet.SessionOwner(w.Name, w.Epoch))
		if err != nil || got != want {
			t.Errorf("%s, asked by kvm1's role: gone = %v, %v; want %v", what, got, err, want)
		}
	}
	check("another worker, registered", kvm2, false)
	check("itself", kvm1, false)
	check("a worker never registered", catalog.Worker{Name: "kvm3", Epoch: 1}, true)
	kvm2again := register("kvm2")
	check("another worker's registration replaced", kvm2, true)
	check("its successor", kvm2again, false)
	if _, err := c.DeclareWorkersLost(ctx, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	check("another worker, lost", kvm2again, true)
}
