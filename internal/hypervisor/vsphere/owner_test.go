package vsphere

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/snapdesc"
)

// TestDeadOwnersSnapshotIsRemoved: connector a (a worker's, its snapshot
// naming its owner) leaves its snapshot on the VM, as a killed worker
// does. Connector b, another worker with a state directory of its own,
// refuses a second snapshot while a's owner is alive, or when it cannot
// tell (no OwnerGone, as a single coffer), and removes a's snapshot once
// OwnerGone says a is dead; a snapshot that names no owner is never
// removed this way.
func TestDeadOwnersSnapshotIsRemoved(t *testing.T) {
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 1})
	ctx := context.Background()
	vm := hypervisor.VMRef{ID: s.vms[0].Value, Name: "vm-0000"}
	a, b := s.connect(t, nil), s.connect(t, nil)
	req := func(session, owner string, gone func(context.Context, string) (bool, error)) hypervisor.SnapshotRequest {
		return hypervisor.SnapshotRequest{SessionID: session, Mode: hypervisor.CrashConsistent, Owner: owner, OwnerGone: gone}
	}
	if _, err := a.Snapshot(ctx, vm, req("left", "worker a epoch 1", nil)); err != nil {
		t.Fatal(err)
	}
	var asked []string
	ownerIs := func(dead bool) func(context.Context, string) (bool, error) {
		return func(_ context.Context, owner string) (bool, error) {
			asked = append(asked, owner)
			return dead, nil
		}
	}
	refused := func(what, left string, r hypervisor.SnapshotRequest) {
		t.Helper()
		sess, err := b.Snapshot(ctx, vm, r)
		if err == nil {
			_, _ = sess.Close(ctx, false)
			t.Fatalf("%s: a second coffer snapshot of the VM was taken", what)
		}
		if !errors.Is(err, hypervisor.ErrTransient) || !strings.Contains(err.Error(), "already has coffer snapshot "+left) {
			t.Fatalf("%s: %v", what, err)
		}
	}
	refused("single coffer", "coffer-left", req("b1", "", nil))
	refused("owner alive", "coffer-left", req("b2", "worker b epoch 1", ownerIs(false)))
	if !slices.Equal(asked, []string{"worker a epoch 1"}) {
		t.Fatalf("OwnerGone asked about %q, want a's registration", asked)
	}

	sess, err := b.Snapshot(ctx, vm, req("b3", "worker b epoch 1", ownerIs(true)))
	if err != nil {
		t.Fatalf("owner dead: %v", err)
	}
	notes := strings.Join(sess.(hypervisor.Noter).Notes(), "\n")
	if !strings.Contains(notes, "removed coffer snapshot coffer-left left by worker a epoch 1, which is dead") {
		t.Errorf("the session's notes do not say what it removed: %q", notes)
	}
	if got := cofferSnapshot(s.vm(s.vms[0]).Snapshot); got == nil || got.Name != "coffer-b3" || snapdesc.Owner(got.Description) != "worker b epoch 1" {
		t.Fatalf("the VM's coffer snapshot is %+v, want b's alone", got)
	}
	if _, err := sess.Close(ctx, false); err != nil {
		t.Fatal(err)
	}

	// A snapshot without an owner (a single coffer's) is its cleanup's.
	lone := s.connect(t, nil)
	ls, err := lone.Snapshot(ctx, vm, req("lone", "", nil))
	if err != nil {
		t.Fatal(err)
	}
	asked = nil
	refused("no owner named", "coffer-lone", req("b4", "worker b epoch 1", ownerIs(true)))
	if len(asked) != 0 {
		t.Errorf("OwnerGone asked about %q for a snapshot naming no owner", asked)
	}
	if _, err := ls.Close(ctx, false); err != nil {
		t.Fatal(err)
	}
	if snap := s.vm(s.vms[0]).Snapshot; snap != nil {
		t.Errorf("the VM keeps snapshots: %+v", snap.RootSnapshotList)
	}
}

// TestRemoveOwnersSnapshots: on a connection's VMs, the snapshots whose
// owner is dead go, those of a live owner or of none stay.
func TestRemoveOwnersSnapshots(t *testing.T) {
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 3})
	ctx := context.Background()
	owners := []string{"worker a epoch 1", "worker c epoch 2", ""}
	for i, owner := range owners {
		c := s.connect(t, nil)
		vm := hypervisor.VMRef{ID: s.vms[i].Value, Name: s.vm(s.vms[i]).Name}
		if _, err := c.Snapshot(ctx, vm, hypervisor.SnapshotRequest{SessionID: "s" + vm.ID, Mode: hypervisor.CrashConsistent, Owner: owner}); err != nil {
			t.Fatal(err)
		}
	}
	b := s.connect(t, nil)
	left, err := b.RemoveOwnersSnapshots(ctx, func(owner string) bool { return owner == "worker a epoch 1" })
	if err != nil || len(left) != 1 || left[0].VM.ID != s.vms[0].Value || left[0].Kind != "vm-snapshot" {
		t.Fatalf("removed %+v, %v; want the dead owner's snapshot alone", left, err)
	}
	for i, owner := range owners {
		if kept := cofferSnapshot(s.vm(s.vms[i]).Snapshot) != nil; kept != (i != 0) {
			t.Errorf("the snapshot of owner %q kept: %v", owner, kept)
		}
	}
}
