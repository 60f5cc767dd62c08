package console_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/storagesnap"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestConsoleKeptStorageSnapshots: a storage snapshot a policy kept (made
// here as the engine makes it, on a loop-mounted XFS with reflinks) is
// listed on the restore page; restoring a VM from it runs a task whose
// page the browser follows, and the file it made is the disk as it was
// at the snapshot (production changed since); deleting it empties the
// list and removes its files.
func TestConsoleKeptStorageSnapshots(t *testing.T) {
	l := newLab(t)
	l.config(tourConfig)
	l.coffer("init")
	mnt := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
	ds := filepath.Join(mnt, "vms")
	if err := os.Mkdir(ds, 0o755); err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(ds, "web-1.raw")
	then := bytes.Repeat([]byte("then"), 256<<10)
	if err := os.WriteFile(disk, then, 0o600); err != nil {
		t.Fatal(err)
	}
	d := hypervisor.DiskInfo{Key: "vda", Name: "vda", Size: int64(len(then)), Datastore: ds, Path: disk, Format: "raw"}
	const label = "coffer-job3-vms-7"
	state := l.vars["COFFER_STATE_DIR"]
	ss, err := storagesnap.Create(context.Background(), policy.StorageProvider{Name: "xfs", Kind: "reflink"}, mnt, state, label, []hypervisor.DiskInfo{d})
	if err != nil {
		t.Fatal(err)
	}
	k := hypervisor.KeptSnapshot{Policy: "nightly", Connection: "lab", JobID: 3, SnapshotMode: "crash-consistent",
		VMs: []hypervisor.KeptVM{{VMRef: hypervisor.VMRef{Name: "web-1", ID: "u-1"}, Disks: []hypervisor.DiskInfo{d}}}}
	if err := ss.(hypervisor.StorageKeeper).Keep(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(disk, bytes.Repeat([]byte("now!"), 256<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	l.start()
	c := l.chrome()
	c.firstRun()

	c.open("/ui/restore")
	c.waitText("#kept-"+label, "web-1")
	c.waitText("main", "Storage snapshots kept by policies")
	c.shot("restore-storage-snapshots")

	c.retype("#kto-"+label, "from-storage")
	c.clickAway("#krestore-" + label)
	c.waitText("#task-status", "success")
	got, err := os.ReadFile(filepath.Join(state, "restores", "from-storage", "web-1.raw"))
	if err != nil || !bytes.Equal(got, then) {
		t.Fatalf("the restored disk (%d bytes, %v) is not the disk at the snapshot", len(got), err)
	}

	c.open("/ui/restore")
	c.run(chromedp.Click("#kforget-" + label))
	c.waitText("#kept-action", "is deleted")
	c.open("/ui/restore")
	c.waitText("main", "Instant recoveries")
	var n int
	c.run(chromedp.Evaluate(`document.querySelectorAll("#kept-h").length`, &n))
	if n != 0 {
		t.Fatal("the deleted storage snapshot is still listed")
	}
	if _, err := os.Stat(filepath.Join(mnt, storagesnap.SnapDir, label)); !os.IsNotExist(err) {
		t.Fatalf("its files are still there: %v", err)
	}
}
