package storagesnap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// keepFor creates a reflink snapshot of disks and keeps it for policy on
// connection lab, as a run would.
func keepFor(t *testing.T, root, state, label, policy string, disks []hypervisor.DiskInfo) {
	t.Helper()
	ss, err := Create(context.Background(), reflinkProvider(), root, state, label, disks)
	if err != nil {
		t.Fatal(err)
	}
	k := hypervisor.KeptSnapshot{Policy: policy, Connection: "lab", VMs: []hypervisor.KeptVM{{VMRef: hypervisor.VMRef{Name: "web-1", ID: "u1"}, Disks: disks}}}
	if err := ss.(hypervisor.StorageKeeper).Keep(context.Background(), k); err != nil {
		t.Fatal(err)
	}
}

// wholeSnapshot checks that a kept snapshot's files read the pattern.
func wholeSnapshot(t *testing.T, root, label string, disks []hypervisor.DiskInfo, pattern byte) {
	t.Helper()
	for _, d := range disks {
		rel, _ := filepath.Rel(root, d.Path)
		if out := run(t, "qemu-io", "-f", d.Format, "-r", "-c", fmt.Sprintf("read -P 0x%x 0 1M", pattern), filepath.Join(root, SnapDir, label, rel)); !strings.Contains(out, "read 1048576/1048576") {
			t.Fatalf("kept snapshot %s's %s is not whole: %s", label, rel, out)
		}
	}
}

// RetainKept with 0 deletes every kept snapshot of the policy on the
// connection, oldest first, and nothing else: another policy's, another
// connection's, and a directory no journal names stay.
func TestRetainKeptZeroDeletesOnlyThePolicys(t *testing.T) {
	mnt := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
	root := filepath.Join(mnt, "vms")
	disks := datastore(t, root, 0x11)
	state := t.TempDir()
	for i := range 3 {
		keepFor(t, root, state, fmt.Sprintf("coffer-nightly-%d", i), "nightly", disks)
	}
	keepFor(t, root, state, "coffer-weekly-0", "weekly", disks)
	decoy := filepath.Join(root, SnapDir, "coffer-decoy")
	if err := os.MkdirAll(decoy, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := RetainKept(context.Background(), state, "nightly", "lab", -1); err == nil {
		t.Fatal("a negative count was accepted")
	}
	if got, err := RetainKept(context.Background(), state, "nightly", "elsewhere", 0); err != nil || len(got) != 0 {
		t.Fatalf("another connection's retention deleted %+v (%v)", got, err)
	}
	got, err := RetainKept(context.Background(), state, "nightly", "lab", 1)
	if err != nil || len(got) != 2 || got[0].Label != "coffer-nightly-0" || got[1].Label != "coffer-nightly-1" {
		t.Fatalf("retain 1 deleted %+v (%v), want the two older", got, err)
	}
	got, err = RetainKept(context.Background(), state, "nightly", "lab", 0)
	if err != nil || len(got) != 1 || got[0].Label != "coffer-nightly-2" {
		t.Fatalf("retain 0 deleted %+v (%v), want the last one", got, err)
	}
	kept, err := List(state)
	if err != nil || len(kept) != 1 || kept[0].Label != "coffer-weekly-0" {
		t.Fatalf("kept %+v (%v), want only weekly's", kept, err)
	}
	wholeSnapshot(t, root, "coffer-weekly-0", disks, 0x11)
	if _, err := os.Stat(decoy); err != nil {
		t.Fatalf("a directory no journal names was touched: %v", err)
	}
	for i := range 3 {
		if _, err := os.Stat(filepath.Join(root, SnapDir, fmt.Sprintf("coffer-nightly-%d", i))); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("coffer-nightly-%d is still there: %v", i, err)
		}
	}
}

// A SIGKILL while a run with keep 0 deletes its policy's kept snapshots:
// the next start's Cleanup finishes the one being deleted, every one still
// listed is whole, and the next run's retention deletes the rest; another
// policy's kept snapshot and the datastore's disks are untouched.
func TestRetainKeptKilledHalfWay(t *testing.T) {
	mnt := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
	root := filepath.Join(mnt, "vms")
	disks := datastore(t, root, 0x11)
	mode := []string{"STORAGESNAP_MODE=retain"}
	for _, at := range []string{"forgetting#1", "forgotten#1", "forgetting#2", "forgotten#3"} {
		t.Run(at, func(t *testing.T) {
			state := t.TempDir()
			tag := strings.ReplaceAll(at, "#", "-")
			var labels []string
			for i := range 3 {
				labels = append(labels, fmt.Sprintf("coffer-%s-%d", tag, i))
				keepFor(t, root, state, labels[i], "nightly", disks)
			}
			other := "coffer-" + tag + "-weekly"
			keepFor(t, root, state, other, "weekly", disks)

			killAt(t, "reflink", root, state, "", at, disks, mode)
			left, err := Cleanup(context.Background(), state)
			if err != nil || len(left) != 1 {
				t.Fatalf("cleanup finished %v (%v), want the one snapshot killed while being deleted", left, err)
			}
			kept, err := List(state)
			if err != nil {
				t.Fatal(err)
			}
			var still []string
			for _, k := range kept {
				wholeSnapshot(t, root, k.Label, disks, 0x11)
				if k.Policy == "nightly" {
					still = append(still, k.Label)
				}
			}
			if len(still) > 0 && !slices.Equal(still, labels[len(labels)-len(still):]) { // deleted oldest first
				t.Fatalf("killed half-way, %v are kept, want the newest of %v", still, labels)
			}
			if _, err := RetainKept(context.Background(), state, "nightly", "lab", 0); err != nil { // the next run
				t.Fatal(err)
			}
			if kept, err := List(state); err != nil || len(kept) != 1 || kept[0].Label != other {
				t.Fatalf("kept after the next run %+v (%v), want only %s", kept, err, other)
			}
			for _, label := range labels {
				if _, err := os.Stat(filepath.Join(root, SnapDir, label)); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("%s is still on the datastore: %v", label, err)
				}
			}
			wholeSnapshot(t, root, other, disks, 0x11)
			if _, err := Forget(context.Background(), state, other); err != nil {
				t.Fatal(err)
			}
			assertNoLeftovers(t, root, state, other)
			for _, d := range disks {
				if out := run(t, "qemu-io", "-f", d.Format, "-r", "-c", "read -P 0x11 0 1M", d.Path); !strings.Contains(out, "read 1048576/1048576") {
					t.Fatalf("%s changed: %s", d.Path, out)
				}
			}
		})
	}
}
