package console_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/coffer-backup/coffer/internal/storagesnap"
	"github.com/coffer-backup/coffer/internal/storagesnap/storagesnaptest"
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
	const label = "coffer-job3-vms-7"
	state := l.vars["COFFER_STATE_DIR"]
	k := storagesnaptest.Keep(t, state, label, "nightly", 3, 1<<20)
	mnt, then := k.Mnt, k.Then
	l.start()
	c := l.chrome()
	c.firstRun()

	c.open("/ui/restore")
	c.waitText("#kept-"+label, "web-1")
	c.waitText("main", "Storage snapshots kept by policies")
	// Connection lab has no storage-snapshots provider in this
	// configuration, so no run of nightly deletes the snapshot: orphaned.
	c.waitText("#korphan-"+label, "orphaned")
	c.waitText("main", "no storage-snapshots provider covers connection lab")
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
