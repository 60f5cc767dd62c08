package qemu_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// While a session of one VM is open (it holds that VM's monitor), another
// VM of the same connection can still be snapshotted: a group batch holds
// all its VMs' sessions open together, and a lookup that took a new
// inventory waited for them, so for itself.
func TestSnapshotWhileAnotherSessionIsOpen(t *testing.T) {
	testutil.RequireBinary(t, "qemu-system-x86_64")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	img, err := guestvm.Build(ctx)
	if err != nil {
		if err == guestvm.ErrNoAssets && !testutil.Strict() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	dir := t.TempDir()
	var socks []string
	for i, name := range []string{"a", "b"} {
		disk := filepath.Join(dir, name+".qcow2")
		if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", disk, "16M").CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		vm, err := guestvm.Start(ctx, img, guestvm.Options{Name: name, UUID: "6b1d3c0e-8f53-4b8e-9a51-0d1c2b3a4e0" + string(rune('0'+i)),
			Dir: filepath.Join(dir, name), Mode: "write", Base: 16, Interval: 50 * time.Millisecond, Disks: []guestvm.Disk{{ID: "vda", Path: disk, Format: "qcow2"}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(vm.Kill)
		if _, err := vm.WaitConsole(ctx, "COFFER READY"); err != nil {
			t.Fatalf("%v\n%s", err, vm.Console())
		}
		socks = append(socks, vm.QMPPath)
	}
	conn, err := qemu.New(qemu.Config{Sockets: socks, StateDir: filepath.Join(dir, "state")})
	if err != nil {
		t.Fatal(err)
	}
	vms, err := conn.Inventory(ctx)
	if err != nil || len(vms) != 2 {
		t.Fatalf("inventory: %v %v", vms, err)
	}
	req := hypervisor.SnapshotRequest{SessionID: "a", Mode: hypervisor.CrashConsistent, Hold: true}
	first, err := conn.Snapshot(ctx, vms[0].VMRef, req)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close(context.Background(), false)
	// Before the fix this waited on a's monitor lock, which no context
	// interrupts: the test then ends at go test's -timeout.
	req.SessionID = "b"
	second, err := conn.Snapshot(ctx, vms[1].VMRef, req)
	if err != nil {
		t.Fatalf("snapshot of %s while %s's session is open: %v", vms[1].Name, vms[0].Name, err)
	}
	for _, s := range []hypervisor.Session{first, second} {
		if err := s.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Close(ctx, false); err != nil {
			t.Fatal(err)
		}
	}
}
