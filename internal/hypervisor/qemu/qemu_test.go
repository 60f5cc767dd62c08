package qemu_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/backup/backuptest"
	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/qmp"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
	"github.com/coffer-backup/coffer/internal/testutil"
)

type lab struct {
	t      *testing.T
	ctx    context.Context
	vm     *guestvm.VM
	conn   *qemu.Connector
	repo   *repo.Repository
	admin  *qmp.Client
	disks  map[string]string
	state  string
	ref    hypervisor.VMRef
	qemuIm string
}

// startLab boots a writing guest with two qcow2 disks and a guest agent,
// plus a repository and a connector.
func startLab(t *testing.T, stateDir string) *lab { return startLabWith(t, stateDir, false) }

// startLabWith optionally fills the disks before boot, so every guest
// write overwrites data that copy-before-write must preserve.
func startLabWith(t *testing.T, stateDir string, prefill bool) *lab {
	testutil.RequireBinary(t, "qemu-system-x86_64")
	qemuImg := testutil.RequireBinary(t, "qemu-img")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	img, err := guestvm.Build(ctx)
	if err != nil {
		if err == guestvm.ErrNoAssets && !testutil.Strict() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	dir := t.TempDir()
	l := &lab{t: t, ctx: ctx, disks: map[string]string{}, qemuIm: qemuImg}
	var disks []guestvm.Disk
	for _, id := range []string{"vda", "vdb"} {
		p := filepath.Join(dir, id+".qcow2")
		if out, err := exec.Command(qemuImg, "create", "-q", "-f", "qcow2", p, "48M").CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		if prefill {
			if out, err := exec.Command("qemu-io", "-f", "qcow2", "-c", "write -P 0x11 0 48M", p).CombinedOutput(); err != nil {
				t.Fatalf("%v %s", err, out)
			}
		}
		l.disks[id] = p
		disks = append(disks, guestvm.Disk{ID: id, Path: p, Format: "qcow2"})
	}
	vmDir := filepath.Join(dir, "vm")
	l.vm, err = guestvm.Start(ctx, img, guestvm.Options{Name: "web-1", UUID: "6b1d3c0e-8f53-4b8e-9a51-0d1c2b3a4f50", Dir: vmDir,
		Mode: "write", Base: 64, Interval: 15 * time.Millisecond, Disks: disks, GuestAgent: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.vm.Kill)
	if _, err := l.vm.WaitConsole(ctx, "COFFER READY"); err != nil {
		t.Fatalf("%v\n%s", err, l.vm.Console())
	}
	if l.admin, err = qmp.Dial(ctx, l.vm.TestQMP); err != nil {
		t.Fatal(err)
	}
	if stateDir == "" {
		stateDir = filepath.Join(dir, "state")
	}
	l.state = stateDir
	if l.conn, err = qemu.New(qemu.Config{Sockets: []string{l.vm.QMPPath}, StateDir: stateDir}); err != nil {
		t.Fatal(err)
	}
	l.repo = newTestRepo(t)
	vms, err := l.conn.Inventory(ctx)
	if err != nil || len(vms) != 1 {
		t.Fatalf("inventory: %v %v", vms, err)
	}
	l.ref = vms[0].VMRef
	if vms[0].Name != "web-1" || vms[0].ID != "6b1d3c0e-8f53-4b8e-9a51-0d1c2b3a4f50" || len(vms[0].Disks) != 2 || !vms[0].GuestAgent {
		t.Fatalf("inventory: %+v", vms[0])
	}
	return l
}

func (l *lab) backup(mode string, sm hypervisor.SnapshotMode) (*repo.Point, error) {
	return backuptest.BackupVM(l.t, l.repo, l.conn, backup.VMRequest{Connection: "lab", VM: l.ref, Mode: mode,
		SnapshotMode: sm, Quiesce: hypervisor.QuiesceRequired})
}

// restoreDisk restores one disk of a point to a raw file.
func (l *lab) restoreDisk(s *repo.Point, key string) string {
	return l.restoreDiskFrom(l.repo, s, key)
}

// restoreDiskFrom restores one disk of a point of repository r.
func (l *lab) restoreDiskFrom(r *repo.Repository, s *repo.Point, key string) string {
	for _, d := range s.Disks {
		if d.Key == key {
			out := filepath.Join(l.t.TempDir(), key+".raw")
			if _, err := restore.ToFile(l.ctx, r, s, d, out, restore.FileOptions{}); err != nil {
				l.t.Fatal(err)
			}
			return out
		}
	}
	l.t.Fatalf("no disk %s in %s", key, s.ID)
	return ""
}

func (l *lab) checkWorkload(path string) guestvm.Report {
	f, err := os.Open(path)
	if err != nil {
		l.t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	rep, err := guestvm.CheckDisk(f, fi.Size())
	if err != nil {
		l.t.Fatalf("restored disk is not consistent: %v", err)
	}
	return rep
}

// liveImage copies a disk as it is now (the VM must be paused).
func (l *lab) liveImage(key string) []byte {
	out := filepath.Join(l.t.TempDir(), key+".live")
	if b, err := exec.Command(l.qemuIm, "convert", "-U", "-O", "raw", l.disks[key], out).CombinedOutput(); err != nil {
		l.t.Fatalf("%v %s", err, b)
	}
	b, _ := os.ReadFile(out)
	return b
}

// assertClean checks that nothing of coffer's is left on the VM but the
// dirty bitmaps of each chain (at most two per disk), and that the VM runs.
func (l *lab) assertClean() {
	l.t.Helper()
	var st struct {
		Status string `json:"status"`
	}
	if err := l.admin.Execute(l.ctx, "query-status", nil, &st); err != nil || st.Status != "running" {
		l.t.Fatalf("VM status %q %v", st.Status, err)
	}
	var nodes []struct {
		Name    string `json:"node-name"`
		Bitmaps []struct {
			Name string `json:"name"`
		} `json:"dirty-bitmaps"`
	}
	if err := l.admin.Execute(l.ctx, "query-named-block-nodes", nil, &nodes); err != nil {
		l.t.Fatal(err)
	}
	for _, n := range nodes {
		if strings.HasPrefix(n.Name, "coffer-") {
			l.t.Fatalf("stray block node %s", n.Name)
		}
		perChain := map[string]int{}
		for _, b := range n.Bitmaps {
			if label, _, _ := strings.Cut(strings.TrimPrefix(b.Name, "coffer-"), "-"); strings.HasPrefix(b.Name, "coffer-") {
				if perChain[label]++; perChain[label] > 2 { // the full anchor and the latest incremental
					l.t.Fatalf("node %s has more than 2 bitmaps of chain %s: %v", n.Name, label, n.Bitmaps)
				}
			}
		}
	}
	var exports []any
	l.admin.Execute(l.ctx, "query-block-exports", nil, &exports)
	if len(exports) != 0 {
		l.t.Fatalf("stray exports %v", exports)
	}
	for _, sub := range []string{"journal", "fleece"} {
		if ents, _ := os.ReadDir(filepath.Join(l.state, sub)); len(ents) != 0 {
			l.t.Fatalf("leftover files in %s: %v", sub, ents)
		}
	}
}

func TestLiveBackupsFullIncrementalDifferential(t *testing.T) {
	l := startLab(t, "")
	full, err := l.backup("", hypervisor.Quiesced)
	if err != nil {
		t.Fatalf("full: %v\n%s", err, l.vm.Console())
	}
	if full.Mode != "full" || len(full.Disks) != 2 {
		t.Fatalf("full: mode %s disks %d", full.Mode, len(full.Disks))
	}
	if full.SnapshotMode != "quiesced" || full.SnapshotModeAchieved != "quiesced" {
		t.Fatalf("full with a running guest agent: requested %q achieved %q", full.SnapshotMode, full.SnapshotModeAchieved)
	}
	l.assertClean()
	rep := l.checkWorkload(l.restoreDisk(full, "vda"))
	t.Logf("full point: %+v, read %d bytes", rep, full.BytesRead)

	// Incremental with the guest paused around it, so the restored image
	// can be compared byte for byte with the disk at the snapshot instant.
	if _, err := l.vm.WaitConsole(l.ctx, "COFFER READY"); err != nil {
		t.Fatal(err)
	}
	if err := l.admin.Execute(l.ctx, "stop", nil, nil); err != nil {
		t.Fatal(err)
	}
	truth := l.liveImage("vda")
	inc, err := l.backup("incremental", hypervisor.CrashConsistent)
	if err != nil {
		t.Fatal(err)
	}
	l.admin.Execute(l.ctx, "cont", nil, nil)
	if inc.SnapshotModeAchieved != "crash-consistent" {
		t.Fatalf("incremental achieved %q", inc.SnapshotModeAchieved)
	}
	if inc.Mode != "incremental" || inc.BytesRead >= full.BytesRead {
		t.Fatalf("incremental: mode %s read %d (full read %d)", inc.Mode, inc.BytesRead, full.BytesRead)
	}
	got, _ := os.ReadFile(l.restoreDisk(inc, "vda"))
	if !bytes.Equal(got, truth) {
		t.Fatal("incremental point differs from the disk at its instant")
	}
	// A second incremental while the guest writes: consistent blocks only.
	inc2, err := l.backup("incremental", hypervisor.CrashConsistent)
	if err != nil || inc2.Mode != "incremental" {
		t.Fatalf("incremental 2: %v", err)
	}
	rep2 := l.checkWorkload(l.restoreDisk(inc2, "vda"))
	if rep2.Written < rep.Written {
		t.Fatalf("incremental lost writes: %+v after %+v", rep2, rep)
	}
	diff, err := l.backup("differential", hypervisor.Suspend)
	if err != nil || diff.Mode != "differential" {
		t.Fatalf("differential: %v %v", err, diff)
	}
	if diff.SnapshotModeAchieved != "suspend" { // the running VM was paused for it
		t.Fatalf("differential with suspend achieved %q", diff.SnapshotModeAchieved)
	}
	l.checkWorkload(l.restoreDisk(diff, "vda"))
	l.assertClean()
	t.Logf("bytes read: full %d, incremental %d, %d, differential %d", full.BytesRead, inc.BytesRead, inc2.BytesRead, diff.BytesRead)
}

// TestFleecingSpaceExhausted puts the fleecing space on a 2 MiB tmpfs and
// overwrites more than that during the backup: the backup fails with
// ErrSnapshotSpace and the VM keeps running.
func TestFleecingSpaceExhausted(t *testing.T) {
	testutil.RequireRoot(t)
	state := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", state).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", state).Run() })
	l := startLabWith(t, state, true)
	sess, err := l.conn.Snapshot(l.ctx, l.ref, hypervisor.SnapshotRequest{SessionID: "space", Mode: hypervisor.CrashConsistent, Track: true})
	if err != nil {
		t.Fatal(err)
	}
	// 96 guest writes of 64 KiB over preserved data: 6 MiB of
	// copy-before-write, which cannot fit in 2 MiB.
	mark := l.vm.Mark()
	for i := 0; i < 6; i++ {
		if mark, _, err = l.vm.WaitConsoleFrom(l.ctx, mark, "COFFER WROTE"); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Contains(l.vm.Console(), "WRITE-ERROR") {
		t.Fatalf("guest writes failed instead of the snapshot:\n%s", l.vm.Console())
	}
	r, err := sess.OpenDisk(l.ctx, "vda")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	_, rerr := r.ReadAt(buf, 0)
	r.Close()
	if _, err := sess.Close(l.ctx, false); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(rerr, hypervisor.ErrSnapshotSpace) {
		t.Fatalf("read from a broken snapshot: %v", rerr)
	}
	l.assertClean()
}

// TestKilledCofferLeavesNothing kills a coffer process (SIGKILL) in the
// middle of a backup session; the next connector's CleanupLeftovers
// removes every node, export, overlay and bitmap it had created.
func TestKilledCofferLeavesNothing(t *testing.T) {
	if sock := os.Getenv("COFFER_TEST_CHILD_QMP"); sock != "" {
		conn, err := qemu.New(qemu.Config{Sockets: []string{sock}, StateDir: os.Getenv("COFFER_TEST_CHILD_STATE")})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		vms, err := conn.Inventory(ctx)
		if err != nil || len(vms) != 1 {
			t.Fatal(err)
		}
		if _, err := conn.Snapshot(ctx, vms[0].VMRef, hypervisor.SnapshotRequest{SessionID: "killed", Mode: hypervisor.CrashConsistent, Track: true}); err != nil {
			t.Fatal(err)
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	l := startLab(t, "")
	if _, err := l.backup("full", hypervisor.CrashConsistent); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledCofferLeavesNothing$")
	cmd.Env = append(os.Environ(), "COFFER_TEST_CHILD_QMP="+l.vm.QMPPath, "COFFER_TEST_CHILD_STATE="+l.state)
	out, err := cmd.CombinedOutput()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("child did not die by signal: %v\n%s", err, out)
	}
	if ents, _ := os.ReadDir(filepath.Join(l.state, "journal")); len(ents) != 1 {
		t.Fatalf("expected the killed session's journal, found %v", ents)
	}
	left, err := l.conn.CleanupLeftovers(l.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) == 0 {
		t.Fatal("cleanup reported nothing")
	}
	t.Logf("cleaned: %+v", left)
	l.assertClean()
	inc, err := l.backup("incremental", hypervisor.CrashConsistent)
	if err != nil || inc.Mode != "incremental" {
		t.Fatalf("incremental after cleanup: %v %+v", err, inc)
	}
	// The tracking survived the kill: every disk was read from its bitmap,
	// not in full. (Bytes read are no measure: the guest writes all the
	// while, so a slow run dirties more than the full read.)
	for _, d := range inc.Disks {
		if d.Mode != "incremental" || d.BytesRead >= d.Size {
			t.Fatalf("disk %s after cleanup: read %s, %d of %d bytes (%s)", d.Key, d.Mode, d.BytesRead, d.Size, d.Warning)
		}
	}
	l.checkWorkload(l.restoreDisk(inc, "vda"))
}
