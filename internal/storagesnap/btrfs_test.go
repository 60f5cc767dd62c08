package storagesnap

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/testutil"
)

func btrfsProvider() policy.StorageProvider {
	return policy.StorageProvider{Name: "sub", Kind: "btrfs", Connections: []string{"lab"}}
}

// btrfsDatastore mounts a btrfs and makes the subvolume vms in it.
func btrfsDatastore(t *testing.T) (mnt, root string) {
	testutil.RequireBinary(t, "btrfs")
	mnt = testutil.MountLoopFS(t, "btrfs", 256<<20, "-q")
	root = filepath.Join(mnt, "vms")
	run(t, "btrfs", "subvolume", "create", root)
	return mnt, root
}

func TestBtrfsSnapshotHoldsTheInstant(t *testing.T) {
	_, root := btrfsDatastore(t)
	holdsTheInstant(t, btrfsProvider(), root)
}

func TestBtrfsRefusesWhatIsNotASubvolume(t *testing.T) {
	mnt, _ := btrfsDatastore(t)
	plain := filepath.Join(mnt, "plain")
	disks := datastore(t, plain, 0x11)
	ctx := context.Background()
	err := Check(ctx, btrfsProvider(), plain)
	if !errors.Is(err, hypervisor.ErrStorageUnsupported) || !strings.Contains(err.Error(), "not a btrfs subvolume") {
		t.Fatalf("Check of a plain directory: %v", err)
	}
	state := t.TempDir()
	if _, err := Create(ctx, btrfsProvider(), plain, state, "coffer-plain", disks); !errors.Is(err, hypervisor.ErrStorageUnsupported) {
		t.Fatalf("Create on a plain directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(plain, SnapDir, "coffer-plain")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("refused snapshot left %v", err)
	}
	if err := Check(ctx, btrfsProvider(), t.TempDir()); err == nil || !strings.Contains(err.Error(), "not on btrfs") {
		t.Fatalf("Check of a directory elsewhere: %v", err)
	}
}

func TestBtrfsKilledAtEveryStepLeavesNothing(t *testing.T) {
	_, root := btrfsDatastore(t)
	killLoop(t, "btrfs", root, nil, []string{"journaled#1", "created#1", "deleting#1", "deleted#1"})
}

// A directory where a snapshot would go that is not a subvolume is not
// coffer's: cleanup leaves it, and says so.
func TestBtrfsCleanupLeavesAPlainDirectoryAlone(t *testing.T) {
	_, root := btrfsDatastore(t)
	state := t.TempDir()
	j := &journal{Label: "coffer-x", Kind: "btrfs", Root: root, Dir: filepath.Join(root, SnapDir, "coffer-x"), PID: 0}
	if err := os.MkdirAll(filepath.Join(j.Dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeJournal(state, j); err != nil {
		t.Fatal(err)
	}
	if _, err := Cleanup(context.Background(), state); err == nil || !strings.Contains(err.Error(), "not a btrfs subvolume") {
		t.Fatalf("cleanup: %v", err)
	}
	if _, err := os.Stat(filepath.Join(j.Dir, "data")); err != nil {
		t.Fatalf("cleanup removed a directory that is not a snapshot: %v", err)
	}
}
