package vsphere

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestKilledCofferLeavesNoHotAddedDisk runs a hot-add read in a child
// process and SIGKILLs it while the snapshot's disk is attached to the
// data mover. The next connector on the same state directory detaches
// exactly that disk (the data mover's own stays), then removes the
// snapshot; the VM's base file is intact.
func TestKilledCofferLeavesNoHotAddedDisk(t *testing.T) {
	l := startHostLab(t, 1<<20)
	mover := l.addMover(t)
	before := l.moverDisks(t, mover)
	state := filepath.Join(t.TempDir(), "state")
	testutil.KillAtPoint(t, "TestHotAddKillChild", "KILL_URL="+l.vc.url.String(), "KILL_THUMB="+l.vc.thumb,
		"KILL_STATE="+state, "KILL_VM="+l.vm.Value, "KILL_DEVICE="+l.flatOnDisk)
	if n := len(l.moverDisks(t, mover)); n != len(before)+1 {
		t.Fatalf("the data mover has %d disks after the kill, want %d", n, len(before)+1)
	}

	c := l.connect(t, func(cfg *Config) { cfg.StateDir = state })
	left, err := c.CleanupLeftovers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 2 || left[0].Kind != "hot-added-disk" || left[0].Name != "[LocalDS_0] vm-0000/disk.vmdk" || left[1].Kind != "vm-snapshot" {
		t.Fatalf("leftovers: %+v", left)
	}
	if after := l.moverDisks(t, mover); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("data mover's disks %v, before %v", after, before)
	}
	checkIntactAndClean(t, l, state)
	if left, err := c.CleanupLeftovers(context.Background()); err != nil || len(left) != 0 {
		t.Fatalf("a second cleanup: %+v, %v", left, err)
	}
}

// fixedDevice is the child's simulated device (see simulatedDevices).
type fixedDevice string

func (f fixedDevice) Device(context.Context, AttachedDisk) (string, error) { return string(f), nil }

// TestHotAddKillChild is the child of TestKilledCofferLeavesNoHotAddedDisk.
func TestHotAddKillChild(t *testing.T) {
	testutil.KillChild(t)
	ctx := context.Background()
	c, err := New(ctx, Config{URL: os.Getenv("KILL_URL"), User: simUser, Password: simPass, Thumbprint: os.Getenv("KILL_THUMB"),
		StateDir: os.Getenv("KILL_STATE"), TaskPoll: 10 * time.Millisecond, DataMoverVM: moverName})
	if err != nil {
		t.Fatal(err)
	}
	c.transport.(*HotAdd).Devices = fixedDevice(os.Getenv("KILL_DEVICE"))
	vm := types.ManagedObjectReference{Type: "VirtualMachine", Value: os.Getenv("KILL_VM")}
	sess, err := c.Snapshot(ctx, hypervisor.VMRef{ID: vm.Value, Name: "vm-0000"},
		hypervisor.SnapshotRequest{SessionID: "killed-hotadd", Mode: hypervisor.CrashConsistent})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.OpenDisk(ctx, sess.Disks()[0].Key); err != nil {
		t.Fatal(err)
	}
	testutil.KillPoint()
}
