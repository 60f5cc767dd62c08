package storagesnap_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/storagesnap"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// An operator lowers keep-storage-snapshots from 2 to 1 on a run whose own
// storage snapshot is refused, then to 0: each next run deletes the kept
// snapshots beyond the new N (no newly kept snapshot would prune them),
// says so in the task log, and leaves alone another policy's kept
// snapshot, the datastore's files and anything in the snapshot directory
// that coffer did not journal.
func TestKeptStorageSnapshotsFollowALoweredKeep(t *testing.T) {
	xfs := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
	ds := filepath.Join(xfs, "vms")
	l := startGroupLab(t, map[string]string{"web-1": ds})
	// min-free 50%: a filler file below makes the datastore refuse a
	// storage snapshot, so a run keeps none of its own.
	providers := policy.StorageSnapshots{{Name: "xfs", Kind: "reflink", Connections: []string{"lab"}, Datastores: []string{xfs}, MinFree: "50%"}}
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

	// Lowered to 1 on a run whose own storage snapshot is refused (the
	// VMs are backed up one by one): the older of the two goes.
	filler := filepath.Join(xfs, "filler")
	var st unix.Statfs_t
	if err := unix.Statfs(xfs, &st); err != nil {
		t.Fatal(err)
	}
	fill(t, filler, int64(st.Bavail)*st.Bsize-int64(st.Blocks)*st.Bsize*2/5)
	zdb.KeepStorageSnapshots, zdb.StorageFallback = 1, "vm"
	res := l.run(providers, zdb)
	if res.Job.Status != catalog.StatusSuccess || len(l.events(res, "storage-fallback")) != 1 {
		t.Fatalf("run with keep 1 and no storage snapshot: %s (%s), fallback %+v", res.Job.Status, res.Job.Error, l.events(res, "storage-fallback"))
	}
	if evs := l.events(res, "storage-snapshot-retention"); len(evs) != 1 || !strings.HasSuffix(evs[0].Message, "("+zdbKept[0]+")") {
		t.Fatalf("retention events %+v, want one naming %s", evs, zdbKept[0])
	}
	if kept, err := storagesnap.List(l.state); err != nil || len(kept) != 2 || kept[1].Label != zdbKept[1] {
		t.Fatalf("kept after keep 1: %+v (%v), want other's and zdb's newer %s", kept, err, zdbKept[1])
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}

	zdb.KeepStorageSnapshots = 0
	res = l.run(providers, zdb)
	if res.Job.Status != catalog.StatusSuccess {
		t.Fatalf("run with keep 0: %s (%s)", res.Job.Status, res.Job.Error)
	}
	evs := l.events(res, "storage-snapshot-retention")
	if len(evs) != 1 || evs[0].Level != "info" || !strings.HasSuffix(evs[0].Message, "("+zdbKept[1]+")") {
		t.Fatalf("retention events %+v, want one naming %s", evs, zdbKept[1])
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

// fill allocates n bytes to path.
func fill(t *testing.T, path string, n int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, n); err != nil {
		t.Fatal(err)
	}
}
