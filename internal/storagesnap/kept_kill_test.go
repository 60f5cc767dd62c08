package storagesnap

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// keepThenForget is the kill loop helper's work in keep mode: the
// snapshot becomes a policy's restore point, then is deleted as its
// retention would.
func keepThenForget(ss hypervisor.StorageSnapshot, state, label string) error {
	k := hypervisor.KeptSnapshot{Policy: "nightly", Connection: "lab", VMs: []hypervisor.KeptVM{{VMRef: hypervisor.VMRef{Name: "web-1", ID: "u1"}}}}
	if err := ss.(hypervisor.StorageKeeper).Keep(context.Background(), k); err != nil {
		return err
	}
	_, err := Forget(context.Background(), state, label)
	return err
}

// A SIGKILL while a snapshot is being kept or deleted as a kept one: a
// kept snapshot is never taken for a leftover (the next start leaves it,
// whole, to its policy), and one killed while being deleted is finished
// by the next start's cleanup, never left half there as a restore point.
func TestReflinkKeptKilledAtEveryStep(t *testing.T) {
	mnt := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
	root := filepath.Join(mnt, "vms")
	disks := datastore(t, root, 0x11)
	keep := []string{"STORAGESNAP_MODE=keep"}

	t.Run("kept#1", func(t *testing.T) {
		state, label := t.TempDir(), "coffer-kill-kept"
		killAt(t, "reflink", root, state, label, "kept#1", disks, keep)
		left, err := Cleanup(context.Background(), state)
		if err != nil || len(left) != 0 {
			t.Fatalf("cleanup removed %v (%v): a kept snapshot is its policy's, not a leftover", left, err)
		}
		kept, err := List(state)
		if err != nil || len(kept) != 1 || kept[0].Label != label || kept[0].Policy != "nightly" || kept[0].VMs[0].Name != "web-1" {
			t.Fatalf("kept %+v (%v), want %s of policy nightly holding web-1", kept, err, label)
		}
		for _, d := range disks {
			rel, _ := filepath.Rel(root, d.Path)
			if out := run(t, "qemu-io", "-f", d.Format, "-r", "-c", "read -P 0x11 0 1M", filepath.Join(root, SnapDir, label, rel)); !strings.Contains(out, "read 1048576/1048576") {
				t.Fatalf("kept snapshot's %s is not whole: %s", rel, out)
			}
		}
		if _, err := Forget(context.Background(), state, label); err != nil {
			t.Fatal(err)
		}
		assertNoLeftovers(t, root, state, label)
	})
	for _, at := range []string{"forgetting#1", "forgotten#1"} {
		t.Run(at, func(t *testing.T) {
			state, label := t.TempDir(), "coffer-kill-"+at[:len(at)-2]
			killAt(t, "reflink", root, state, label, at, disks, keep)
			if kept, err := List(state); err != nil || len(kept) != 0 {
				t.Fatalf("a snapshot being deleted is listed as kept: %+v (%v)", kept, err)
			}
			left, err := Cleanup(context.Background(), state)
			if err != nil || len(left) != 1 || left[0].Name != label {
				t.Fatalf("cleanup reported %v (%v), want %s finished", left, err, label)
			}
			assertNoLeftovers(t, root, state, label)
		})
	}
	for _, d := range disks {
		if _, err := os.Stat(d.Path); err != nil {
			t.Fatalf("production disk %s: %v", d.Path, err)
		}
	}
}
