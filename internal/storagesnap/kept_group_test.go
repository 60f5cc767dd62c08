package storagesnap_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/offload"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/restore"
	"github.com/coffer-backup/coffer/internal/storagesnap"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// Storage snapshots as fast restore points (keep-storage-snapshots): each
// group run of two writing guests keeps its storage snapshot, the newest
// two are kept, and a VM restored from the newest one is a clone (no data
// through the host) whose disk equals, byte for byte, the repository
// point the same run wrote.
func TestKeptStorageSnapshotsAreRestorePoints(t *testing.T) {
	xfs := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
	ds := filepath.Join(xfs, "vms")
	l := startGroupLab(t, map[string]string{"web-1": ds, "web-2": ds})
	providers := policy.StorageSnapshots{{Name: "xfs", Kind: "reflink", Connections: []string{"lab"}, Datastores: []string{xfs}}}
	p := policy.Policy{Name: "zdb", Snapshot: string(hypervisor.Quiesced), KeepStorageSnapshots: 2}

	var last map[string]catalog.Task
	var labels []string
	for run := range 3 {
		res := l.run(providers, p)
		if res.Job.Status != catalog.StatusSuccess || len(res.Tasks) != 2 {
			t.Fatalf("run %d: %s (%s), failed %+v", run, res.Job.Status, res.Job.Error, res.Failed())
		}
		kept := l.events(res, "storage-snapshot-kept")
		if len(kept) != 1 || kept[0].Level != "info" {
			t.Fatalf("run %d: kept events %+v, want the storage snapshot kept", run, kept)
		}
		if del := l.events(res, "storage-snapshot-deleted"); len(del) != 0 {
			t.Fatalf("run %d: a kept snapshot was deleted: %+v", run, del)
		}
		list, err := storagesnap.List(l.state)
		if err != nil || len(list) != min(run+1, 2) {
			t.Fatalf("run %d: kept %+v (%v), want %d", run, list, err, min(run+1, 2))
		}
		newest := list[len(list)-1]
		if newest.Policy != "zdb" || newest.JobID != res.Job.ID || newest.Connection != "lab" || len(newest.VMs) != 2 || newest.SnapshotMode != "quiesced" {
			t.Fatalf("run %d: newest kept %+v, want job %d's of policy zdb with its 2 VMs", run, newest, res.Job.ID)
		}
		labels = append(labels, newest.Label)
		last = map[string]catalog.Task{}
		for _, tk := range res.Tasks {
			last[tk.VMName] = tk
		}
	}
	if _, err := os.Stat(filepath.Join(xfs, storagesnap.SnapDir, labels[0])); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the oldest kept snapshot %s is still on the datastore (%v), want it pruned", labels[0], err)
	}
	// The next start's cleanup leaves kept snapshots to their policy.
	if left, err := storagesnap.Cleanup(l.ctx, l.state); err != nil || len(left) != 0 {
		t.Fatalf("cleanup removed %v (%v), want the kept snapshots left", left, err)
	}

	target := filepath.Join(xfs, "restored")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := storagesnap.Restore(l.ctx, l.state, labels[2], "web-1", target, offload.CopyOptions{})
	if err != nil || len(got) != 1 || got[0].Method != offload.Cloned {
		t.Fatalf("restore from the kept snapshot: %+v, %v; want one disk, cloned", got, err)
	}
	fromStorage := raw(t, got[0].Target, "qcow2")
	fromRepo := l.pointDisk(last["web-1"])
	if !bytes.Equal(fromStorage, fromRepo) {
		t.Fatal("the disk restored from the kept storage snapshot differs from the point the same run wrote")
	}
	if _, err := guestvm.CheckDisk(bytes.NewReader(fromStorage), int64(len(fromStorage))); err != nil {
		t.Fatalf("restored disk is not consistent: %v", err)
	}

	// Bad input loses nothing: a target that exists, a VM the snapshot
	// does not hold, a label that is not kept.
	if _, err := storagesnap.Restore(l.ctx, l.state, labels[2], "web-1", target, offload.CopyOptions{}); !errors.Is(err, offload.ErrTargetExists) {
		t.Fatalf("restore over an existing disk: %v, want refused", err)
	}
	if _, err := storagesnap.Restore(l.ctx, l.state, labels[2], "db-9", target, offload.CopyOptions{}); !errors.Is(err, storagesnap.ErrKeptNotFound) {
		t.Fatalf("restore of a VM the snapshot lacks: %v", err)
	}
	if _, err := storagesnap.Restore(l.ctx, l.state, labels[0], "web-1", target, offload.CopyOptions{}); !errors.Is(err, storagesnap.ErrKeptNotFound) {
		t.Fatalf("restore from a pruned snapshot: %v", err)
	}
	if !bytes.Equal(raw(t, got[0].Target, "qcow2"), fromRepo) {
		t.Fatal("a refused restore changed the restored disk")
	}

	// The guests run on, and forgetting the kept snapshots leaves nothing.
	for _, label := range labels[1:] {
		if _, err := storagesnap.Forget(l.ctx, l.state, label); err != nil {
			t.Fatal(err)
		}
	}
	l.released(ds)
}

// pointDisk restores a task's point's first disk from the repository.
func (l *groupLab) pointDisk(tk catalog.Task) []byte {
	l.t.Helper()
	snaps, err := l.repo.Points(l.ctx, nil)
	if err != nil {
		l.t.Fatal(err)
	}
	for _, s := range snaps {
		if s.ID.String() == tk.BackupPointID {
			out := filepath.Join(l.t.TempDir(), "point.raw")
			if _, err := restore.ToFile(l.ctx, l.repo, s, s.Disks[0], out, restore.FileOptions{}); err != nil {
				l.t.Fatal(err)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				l.t.Fatal(err)
			}
			return b
		}
	}
	l.t.Fatalf("point %s of %s not in the repository", tk.BackupPointID, tk.VMName)
	return nil
}

// raw reads a disk image's guest-visible bytes.
func raw(t *testing.T, path, format string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "disk.raw")
	if b, err := exec.Command("qemu-img", "convert", "-f", format, "-O", "raw", path, out).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert %s: %v %s", path, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Change tracking that survives power-off: web-1's dirty bitmaps are lost
// (removed behind coffer's back, as a QEMU crash loses them) between two
// runs of a policy that keeps storage snapshots. Its incremental then
// takes the changes from the two storage snapshots (FIEMAP) instead of
// reading the whole disk, says so, passes the self-check, and its point
// equals the disk in the new storage snapshot. web-2, whose bitmaps are
// there, is tracked by QEMU as before.
func TestStorageChangeSetsAfterBitmapsAreLost(t *testing.T) {
	xfs := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
	ds := filepath.Join(xfs, "vms")
	l := startGroupLab(t, map[string]string{"web-1": ds, "web-2": ds})
	providers := policy.StorageSnapshots{{Name: "xfs", Kind: "reflink", Connections: []string{"lab"}, Datastores: []string{xfs}}}
	// Two spans of self-check, not the default eight: on these small
	// disks eight would read as much as the change set does.
	p := policy.Policy{Name: "zdb", KeepStorageSnapshots: 2, ChangeCheck: 2}

	full := l.run(providers, p)
	if full.Job.Status != catalog.StatusSuccess {
		t.Fatalf("full: %s (%s) %+v", full.Job.Status, full.Job.Error, full.Failed())
	}
	fullRead := map[string]int64{}
	for _, tk := range full.Tasks {
		fullRead[tk.VMName] = tk.BytesRead
	}
	if n := l.dropBitmaps("web-1"); n == 0 {
		t.Fatal("web-1 has no coffer bitmaps to lose")
	}

	inc := l.run(providers, p)
	if inc.Job.Status != catalog.StatusSuccess {
		t.Fatalf("incremental: %s (%s) %+v", inc.Job.Status, inc.Job.Error, inc.Failed())
	}
	list, err := storagesnap.List(l.state)
	if err != nil || len(list) != 2 {
		t.Fatalf("kept %+v (%v)", list, err)
	}
	for _, tk := range inc.Tasks {
		warned := strings.Contains(strings.Join(tk.Warnings, "\n"), "change set comes from the storage")
		if tk.Mode != "incremental" || tk.BytesRead*2 > fullRead[tk.VMName] || warned != (tk.VMName == "web-1") {
			t.Fatalf("%s: %s reading %d bytes after a full of %d, warnings %q", tk.VMName, tk.Mode, tk.BytesRead, fullRead[tk.VMName], tk.Warnings)
		}
		if strings.Contains(strings.Join(tk.Warnings, "\n"), "read in full") || strings.Contains(strings.Join(tk.Warnings, "\n"), "change tracking") {
			t.Fatalf("%s: %q", tk.VMName, tk.Warnings)
		}
		if tk.VMName != "web-1" {
			continue
		}
		target := t.TempDir()
		got, err := storagesnap.Restore(l.ctx, l.state, list[1].Label, "web-1", target, offload.CopyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(raw(t, got[0].Target, "qcow2"), l.pointDisk(tk)) {
			t.Fatal("the incremental from the storage's change set differs from the disk in the storage snapshot")
		}
	}
}

// dropBitmaps removes coffer's dirty bitmaps from a guest's disks, as a
// crash of its QEMU loses them, and returns how many there were.
func (l *groupLab) dropBitmaps(vm string) int {
	l.t.Helper()
	var nodes []struct {
		Name    string `json:"node-name"`
		Bitmaps []struct {
			Name string `json:"name"`
		} `json:"dirty-bitmaps"`
	}
	if err := l.admins[vm].Execute(l.ctx, "query-named-block-nodes", nil, &nodes); err != nil {
		l.t.Fatal(err)
	}
	n := 0
	for _, node := range nodes {
		for _, b := range node.Bitmaps {
			if !strings.HasPrefix(b.Name, "coffer-") {
				continue
			}
			if err := l.admins[vm].Execute(l.ctx, "block-dirty-bitmap-remove", map[string]any{"node": node.Name, "name": b.Name}, nil); err != nil {
				l.t.Fatal(err)
			}
			n++
		}
	}
	return n
}
