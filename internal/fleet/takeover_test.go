package fleet

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/fleet/queue"
	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// The leader records a unit's point only while the worker that ran it is
// still registered at the epoch it ran under: a worker replaced or lost
// since is fenced, and the unit retried.
func TestPointOfAReplacedWorkerIsFenced(t *testing.T) {
	registry := map[string]int64{"kvm1": 3}
	r := &UnitRunner{Epoch: func(_ context.Context, w string) (int64, error) {
		if e, ok := registry[w]; ok {
			return e, nil
		}
		return 0, errors.New("not registered, or lost")
	}}
	ctx := context.Background()
	if err := r.stillCurrent(ctx, "kvm1", 3); err != nil {
		t.Fatalf("the current epoch: %v", err)
	}
	for _, c := range []struct {
		worker string
		epoch  int64
	}{{"kvm1", 2}, {"kvm2", 1}} {
		err := r.stillCurrent(ctx, c.worker, c.epoch)
		if err == nil || !errors.Is(err, hypervisor.ErrTransient) {
			t.Errorf("%s at epoch %d: %v, want a transient (retried) fence", c.worker, c.epoch, err)
		}
	}
}

// heldLog is an engine's holds as a fake Holder sees them.
type heldLog struct{ held map[string]int }

func (h *heldLog) Hold(x engine.Held) func() {
	h.held[x.VMID]++
	return func() { h.held[x.VMID]-- }
}

// A grant held at takeover is released once its worker is lost or
// registered again (its job may stay running in River for an hour), and
// all of them when the server stops leading; a live worker's stays held.
func TestGrantsReleasedWithTheirWorkers(t *testing.T) {
	h := &heldLog{held: map[string]int{}}
	_, cancel := context.WithCancel(context.Background())
	g := &Grants{log: slog.New(slog.NewTextHandler(io.Discard, nil)), cancel: cancel, held: map[int64]heldGrant{}}
	for i, u := range []queue.VMUnit{
		{VMID: "a", Worker: "kvm1", Epoch: 1}, {VMID: "b", Worker: "kvm2", Epoch: 1},
		{VMID: "c", Worker: "kvm3", Epoch: 1}, {VMID: "d", Worker: "kvm4", Epoch: 4},
	} {
		g.held[int64(i)] = heldGrant{unit: u, release: h.Hold(engine.Held{VMID: u.VMID})}
	}
	g.Observe([]Worker{
		{Name: "kvm1", Epoch: 1, State: catalog.WorkerReady},
		{Name: "kvm2", Epoch: 2, State: catalog.WorkerReady}, // registered again
		{Name: "kvm3", Epoch: 1, State: catalog.WorkerLost},
		{Name: "kvm4", Epoch: 4, State: catalog.WorkerDraining}, // finishing its units
	})
	want := map[string]int{"a": 1, "b": 0, "c": 0, "d": 1}
	for vm, n := range want {
		if h.held[vm] != n {
			t.Errorf("%s held %d times, want %d", vm, h.held[vm], n)
		}
	}
	if g.Len() != 2 {
		t.Errorf("%d grants held, want 2", g.Len())
	}
	g.Release()
	if h.held["a"] != 0 || h.held["d"] != 0 || g.Len() != 0 {
		t.Errorf("after Release: %v, %d held", h.held, g.Len())
	}
}
