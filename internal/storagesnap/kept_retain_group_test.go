package storagesnap_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/storagesnap"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// An operator lowers keep-storage-snapshots from 2 to 0: the policy's next
// run deletes the snapshots it kept before (its own run keeps none, so no
// newly kept snapshot would prune them), says so in the task log, and
// leaves alone another policy's kept snapshot, the datastore's files and
// anything in the snapshot directory that coffer did not journal.
func TestKeptStorageSnapshotsFollowALoweredKeep(t *testing.T) {
	xfs := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
	ds := filepath.Join(xfs, "vms")
	l := startGroupLab(t, map[string]string{"web-1": ds})
	providers := policy.StorageSnapshots{{Name: "xfs", Kind: "reflink", Connections: []string{"lab"}, Datastores: []string{xfs}}}
	notes := filepath.Join(ds, "notes.txt")
	if err := os.WriteFile(notes, []byte("not a VM's"), 0o644); err != nil {
		t.Fatal(err)
	}
	decoy := filepath.Join(xfs, storagesnap.SnapDir, "coffer-decoy")
	if err := os.MkdirAll(decoy, 0o755); err != nil {
		t.Fatal(err)
	}

	ok := func(p policy.Policy) *catalog.Job {
		t.Helper()
		res := l.run(providers, p)
		if res.Job.Status != catalog.StatusSuccess {
			t.Fatalf("policy %s: %s (%s)", p.Name, res.Job.Status, res.Job.Error)
		}
		return &res.Job
	}
	ok(policy.Policy{Name: "other", KeepStorageSnapshots: 1})
	zdb := policy.Policy{Name: "zdb", KeepStorageSnapshots: 2}
	for range 3 {
		ok(zdb)
	}
	before, err := storagesnap.List(l.state)
	if err != nil || len(before) != 3 {
		t.Fatalf("kept %+v (%v), want other's 1 and zdb's 2", before, err)
	}
	var zdbKept []string
	for _, k := range before {
		if k.Policy == "zdb" {
			zdbKept = append(zdbKept, k.Label)
		}
	}
	disk, err := os.Stat(filepath.Join(ds, "web-1-vda.qcow2"))
	if err != nil {
		t.Fatal(err)
	}

	zdb.KeepStorageSnapshots = 0
	res := l.run(providers, zdb)
	if res.Job.Status != catalog.StatusSuccess {
		t.Fatalf("run with keep 0: %s (%s)", res.Job.Status, res.Job.Error)
	}
	evs := l.events(res, "storage-snapshot-retention")
	if len(evs) != 1 || evs[0].Level != "info" || !strings.Contains(evs[0].Message, strings.Join(zdbKept, ", ")) {
		t.Fatalf("retention events %+v, want one naming %v", evs, zdbKept)
	}
	after, err := storagesnap.List(l.state)
	if err != nil || len(after) != 1 || after[0].Policy != "other" || after[0].Label != before[0].Label {
		t.Fatalf("kept after keep 0: %+v (%v), want only other's %s", after, err, before[0].Label)
	}
	for _, label := range zdbKept {
		if _, err := os.Stat(filepath.Join(xfs, storagesnap.SnapDir, label)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("zdb's kept snapshot %s is still on the datastore (%v)", label, err)
		}
	}
	if b, err := os.ReadFile(notes); err != nil || string(b) != "not a VM's" {
		t.Fatalf("the datastore's other file: %q, %v", b, err)
	}
	if now, err := os.Stat(filepath.Join(ds, "web-1-vda.qcow2")); err != nil || !os.SameFile(disk, now) {
		t.Fatalf("web-1's disk file was replaced or removed (%v)", err)
	}
	if _, err := os.Stat(decoy); err != nil {
		t.Fatalf("a directory coffer did not journal was touched: %v", err)
	}
	// Nothing is left for a later start to clean up, and a further run
	// with keep 0 has nothing to delete.
	if left, err := storagesnap.Cleanup(l.ctx, l.state); err != nil || len(left) != 0 {
		t.Fatalf("cleanup found %v (%v)", left, err)
	}
	if evs := l.events(l.run(providers, zdb), "storage-snapshot-retention"); len(evs) != 0 {
		t.Fatalf("a run with nothing to delete logged %+v", evs)
	}
	if _, err := storagesnap.Forget(l.ctx, l.state, before[0].Label); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(decoy); err != nil {
		t.Fatal(err)
	}
	l.released(ds)
}
