package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/fleet"
)

// TestOwnerGone reads the registry of a real catalog: a registration is
// dead once lost, replaced by a later one of its name, or gone; a current
// one is alive even with a late heartbeat, until it is declared lost. An
// owner string that names no registration is an error, never dead.
func TestOwnerGone(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)()
	gone := fleet.OwnerGone(cat)
	start := time.Now().Add(-time.Hour) // heartbeats long late
	register := func(name string) catalog.Worker {
		w, err := cat.RegisterWorker(ctx, catalog.Worker{Name: name, Host: name, Version: "test", Protocol: 1, Slots: 1}, start)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	a1, b1 := register("a"), register("b")
	check := func(what string, w catalog.Worker, want bool) {
		t.Helper()
		got, err := gone(ctx, fleet.SessionOwner(w.Name, w.Epoch))
		if err != nil || got != want {
			t.Errorf("%s: gone = %v, %v; want %v", what, got, err, want)
		}
	}
	check("a registration with a late heartbeat", a1, false)
	a2 := register("a")
	check("a registration replaced", a1, true)
	check("its successor", a2, false)
	if _, err := cat.DeclareWorkersLost(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	check("a lost registration", b1, true)
	check("a lost successor", a2, true)
	check("a worker never registered", catalog.Worker{Name: "c", Epoch: 1}, true)
	if got, err := gone(ctx, "worker a"); err == nil || got {
		t.Errorf("an owner naming no registration: gone = %v, %v; want an error", got, err)
	}
}
