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

// TestKilledCofferLeavesNoSnapshot runs a real coffer session in a child
// process, SIGKILLs it while its snapshot exists, and checks that the next
// connector on the same state directory removes exactly that snapshot: an
// administrator's snapshot on the same VM stays.
func TestKilledCofferLeavesNoSnapshot(t *testing.T) {
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 1})
	ref := s.vms[0]
	s.userSnapshot(t, ref, "before-upgrade")
	state := filepath.Join(t.TempDir(), "state")
	testutil.KillAtPoint(t, "TestKillChild", "KILL_URL="+s.url.String(), "KILL_THUMB="+s.thumb,
		"KILL_STATE="+state, "KILL_VM="+ref.Value)
	if n := len(s.snapshots(ref)); n != 2 {
		t.Fatalf("%d snapshots after the kill, want the admin's and coffer's", n)
	}

	c := s.connect(t, func(cfg *Config) { cfg.StateDir = state })
	left, err := c.CleanupLeftovers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].Kind != "vm-snapshot" || !strings.HasPrefix(left[0].Name, SnapshotPrefix) {
		t.Fatalf("leftovers: %+v", left)
	}
	snaps := s.snapshots(ref)
	if _, ok := snaps["before-upgrade"]; !ok || len(snaps) != 1 {
		t.Fatalf("snapshots after cleanup: %v", snaps)
	}
	if js, _ := filepath.Glob(filepath.Join(journalDir(state), "*.json")); len(js) != 0 {
		t.Fatalf("journals left: %v", js)
	}
}

// TestKillChild is the child of TestKilledCofferLeavesNoSnapshot: it takes
// a snapshot through a connector and waits to be killed.
func TestKillChild(t *testing.T) {
	testutil.KillChild(t)
	ctx := context.Background()
	c, err := New(ctx, Config{URL: os.Getenv("KILL_URL"), User: simUser, Password: simPass,
		Thumbprint: os.Getenv("KILL_THUMB"), StateDir: os.Getenv("KILL_STATE"), TaskPoll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	vm := types.ManagedObjectReference{Type: "VirtualMachine", Value: os.Getenv("KILL_VM")}
	if _, err := c.Snapshot(ctx, hypervisor.VMRef{ID: vm.Value, Name: "vm-0000"},
		hypervisor.SnapshotRequest{SessionID: "killed", Mode: hypervisor.CrashConsistent}); err != nil {
		t.Fatal(err)
	}
	testutil.KillPoint()
}
