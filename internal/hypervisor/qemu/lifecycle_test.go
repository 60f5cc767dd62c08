package qemu_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/qmp"
	"github.com/coffer-backup/coffer/internal/repo"
)

// restartOptions say how the lab's VM goes down and comes back.
type restartOptions struct {
	kill    bool   // SIGKILL QEMU instead of a clean quit
	addDisk string // a new empty disk attached on restart
	noAgent bool   // come back without a guest agent channel
}

// restart stops the VM (cleanly through QMP, or with SIGKILL) and boots it
// again on the same disks, monitor sockets and identity.
func (l *lab) restart(o restartOptions) {
	l.t.Helper()
	if o.kill {
		l.vm.Kill()
	} else {
		if err := l.admin.Execute(l.ctx, "quit", nil, nil); err != nil && !errors.Is(err, qmp.ErrClosed) {
			l.t.Fatal(err)
		}
		select {
		case <-l.vm.Exited():
		case <-l.ctx.Done():
			l.t.Fatal("QEMU did not quit")
		}
	}
	l.admin.Close()
	if o.addDisk != "" {
		p := filepath.Join(filepath.Dir(l.disks["vda"]), o.addDisk+".qcow2")
		if out, err := exec.Command(l.qemuIm, "create", "-q", "-f", "qcow2", p, "16M").CombinedOutput(); err != nil {
			l.t.Fatalf("%v %s", err, out)
		}
		l.disks[o.addDisk] = p
	}
	var disks []guestvm.Disk
	for _, id := range []string{"vda", "vdb", "vdc"} {
		if p, ok := l.disks[id]; ok {
			disks = append(disks, guestvm.Disk{ID: id, Path: p, Format: "qcow2"})
		}
	}
	img, err := guestvm.Build(l.ctx)
	if err != nil {
		l.t.Fatal(err)
	}
	l.vm, err = guestvm.Start(l.ctx, img, guestvm.Options{Name: "web-1", UUID: l.ref.ID, Dir: filepath.Dir(l.vm.QMPPath),
		Mode: "write", Base: 64, Interval: 15 * time.Millisecond, Disks: disks, GuestAgent: !o.noAgent})
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(l.vm.Kill)
	// The workload finds its dataset and checks it before writing again.
	if _, err := l.vm.WaitConsole(l.ctx, "COFFER READY"); err != nil {
		l.t.Fatalf("%v\n%s", err, l.vm.Console())
	}
	if !strings.Contains(l.vm.Console(), "COFFER CHECK OK") {
		l.t.Fatalf("guest did not verify its disk after the restart:\n%s", l.vm.Console())
	}
	if l.admin, err = qmp.Dial(l.ctx, l.vm.TestQMP); err != nil {
		l.t.Fatal(err)
	}
}

// pausedIncremental takes an incremental with the guest paused around it
// and compares the restored vda with the disk at that instant.
func (l *lab) pausedIncremental() *repo.Point {
	l.t.Helper()
	if err := l.admin.Execute(l.ctx, "stop", nil, nil); err != nil {
		l.t.Fatal(err)
	}
	truth := l.liveImage("vda")
	s, err := l.backup("incremental", hypervisor.CrashConsistent)
	if err := errors.Join(err, l.admin.Execute(l.ctx, "cont", nil, nil)); err != nil {
		l.t.Fatal(err)
	}
	if got, _ := os.ReadFile(l.restoreDisk(s, "vda")); !bytes.Equal(got, truth) {
		l.t.Fatalf("point %s (%s) differs from the disk at its instant", s.ID.Short(), s.Mode)
	}
	return s
}

// A clean QEMU restart keeps the persistent bitmaps: the next backup is a
// correct incremental.
func TestCleanRestartKeepsChangeTracking(t *testing.T) {
	l := startLab(t, "")
	full, err := l.backup("full", hypervisor.CrashConsistent)
	if err != nil {
		t.Fatal(err)
	}
	l.restart(restartOptions{})
	inc := l.pausedIncremental()
	if inc.Mode != "incremental" || len(inc.Warnings) != 0 || inc.BytesRead >= full.BytesRead {
		t.Fatalf("after a clean restart: mode %s, warnings %v, read %d of the full's %d", inc.Mode, inc.Warnings, inc.BytesRead, full.BytesRead)
	}
	l.assertClean()
}

// A killed QEMU leaves its bitmaps inconsistent: the next backup reads
// everything, says so, and is correct; the one after is incremental again.
func TestKilledQEMUMeansFullReadWithWarning(t *testing.T) {
	l := startLab(t, "")
	if _, err := l.backup("full", hypervisor.CrashConsistent); err != nil {
		t.Fatal(err)
	}
	l.restart(restartOptions{kill: true})
	s := l.pausedIncremental()
	if !strings.Contains(strings.Join(s.Warnings, "\n"), "read in full") {
		t.Fatalf("no warning after QEMU was killed: %v", s.Warnings)
	}
	for _, d := range s.Disks {
		if d.Mode != "full" {
			t.Fatalf("disk %s read as %s after QEMU was killed", d.Key, d.Mode)
		}
	}
	next := l.pausedIncremental()
	if next.Mode != "incremental" || len(next.Warnings) != 0 {
		t.Fatalf("tracking did not recover: %s %v", next.Mode, next.Warnings)
	}
	l.assertClean()
}

// A disk added between backups is read in full with a warning; the others
// stay incremental.
func TestDiskAddedBetweenBackups(t *testing.T) {
	l := startLab(t, "")
	if _, err := l.backup("full", hypervisor.CrashConsistent); err != nil {
		t.Fatal(err)
	}
	l.restart(restartOptions{addDisk: "vdc"})
	s := l.pausedIncremental()
	modes := map[string]string{}
	for _, d := range s.Disks {
		modes[d.Key] = d.Mode
	}
	if len(s.Disks) != 3 || modes["vda"] != "incremental" || modes["vdb"] != "incremental" || modes["vdc"] != "full" {
		t.Fatalf("disk modes after adding vdc: %v", modes)
	}
	if !strings.Contains(strings.Join(s.Warnings, "\n"), "vdc") {
		t.Fatalf("no warning naming the new disk: %v", s.Warnings)
	}
}

// Without a guest agent, quiesced backups fall back with a warning, or
// fail when the policy requires quiescing; the VM is left running.
func TestQuiesceWithoutGuestAgent(t *testing.T) {
	l := startLab(t, "")
	l.restart(restartOptions{noAgent: true})
	w, err := l.repo.NewWriter(l.ctx, "vm")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(l.ctx)
	req := backup.VMRequest{Connection: "lab", VM: l.ref, Mode: "full", SnapshotMode: hypervisor.Quiesced, Quiesce: hypervisor.QuiesceRequired,
		Timeouts: hypervisor.Timeouts{Quiesce: 3 * time.Second}} // the agent never answers
	_, err = backup.BackupVM(l.ctx, w, l.conn, req, backup.Options{})
	if !errors.Is(err, hypervisor.ErrQuiesceFailed) {
		t.Fatalf("required quiesce without an agent: %v", err)
	}
	l.assertClean()
	req.Quiesce = hypervisor.QuiesceFallback
	s, err := backup.BackupVM(l.ctx, w, l.conn, req, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.ToLower(strings.Join(s.Warnings, "\n")), "agent") {
		t.Fatalf("fallback without a warning: %v", s.Warnings)
	}
	// The manifest says what the point holds, not what was asked.
	stored, err := l.repo.LoadPoint(l.ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.SnapshotMode != "quiesced" || stored.SnapshotModeAchieved != "crash-consistent" {
		t.Fatalf("fallback point records requested %q achieved %q", stored.SnapshotMode, stored.SnapshotModeAchieved)
	}
	l.checkWorkload(l.restoreDisk(s, "vda"))
	l.assertClean()
}

// A backup that fails midway leaves change tracking as if it had not run:
// the next incremental still holds every write since the last good point.
func TestFailedBackupKeepsTrackingState(t *testing.T) {
	l := startLab(t, "")
	full, err := l.backup("full", hypervisor.CrashConsistent)
	if err != nil {
		t.Fatal(err)
	}
	since := map[string]string{}
	for _, d := range full.Disks {
		since[d.Key] = d.ChangeToken
	}
	mark := l.vm.Mark()
	if mark, _, err = l.vm.WaitConsoleFrom(l.ctx, mark, "COFFER WROTE"); err != nil {
		t.Fatal(err)
	}
	sess, err := l.conn.Snapshot(l.ctx, l.ref, hypervisor.SnapshotRequest{SessionID: "fails", Mode: hypervisor.CrashConsistent, Track: true, Since: since})
	if err != nil {
		t.Fatal(err)
	}
	r, err := sess.OpenDisk(l.ctx, "vda")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadAt(make([]byte, 1<<20), 0); err != nil {
		t.Fatal(err)
	}
	r.Close()
	// The guest writes on while the backup "fails" (the repository, the
	// network or the job died): the session is closed as failed.
	if _, _, err = l.vm.WaitConsoleFrom(l.ctx, mark, "COFFER WROTE"); err != nil {
		t.Fatal(err)
	}
	if tokens, err := sess.Close(l.ctx, false); err != nil || len(tokens) != 0 {
		t.Fatalf("failed session close: %v %v", tokens, err)
	}
	l.assertClean()
	inc := l.pausedIncremental() // compares with the disk at its instant
	if inc.Mode != "incremental" || len(inc.Warnings) != 0 {
		t.Fatalf("after a failed backup: %s %v", inc.Mode, inc.Warnings)
	}
}

// A with-memory point holds a memory stream next to the disks, and change
// tracking survives the memory save (which inactivates the block nodes):
// the next incremental is exact.
func TestWithMemoryKeepsChangeTracking(t *testing.T) {
	l := startLab(t, "")
	s, err := l.backup("full", hypervisor.WithMemory)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, d := range s.Disks {
		kinds[d.Key] = d.Kind
	}
	if kinds["memory"] != hypervisor.KindMemory || kinds["vda"] != hypervisor.KindDisk || len(s.Disks) != 3 {
		t.Fatalf("with-memory point streams: %v", kinds)
	}
	if s.SnapshotModeAchieved != string(hypervisor.WithMemory) {
		t.Fatalf("with-memory point achieved %q", s.SnapshotModeAchieved)
	}
	l.checkWorkload(l.restoreDisk(s, "vda"))
	l.assertClean()
	inc := l.pausedIncremental()
	if inc.Mode != "incremental" || len(inc.Warnings) != 0 {
		t.Fatalf("after a with-memory backup: %s %v", inc.Mode, inc.Warnings)
	}
	// A paused VM has no running memory to save: the point holds the disks
	// only, and says it is crash-consistent.
	if err := l.admin.Execute(l.ctx, "stop", nil, nil); err != nil {
		t.Fatal(err)
	}
	paused, err := l.backup("incremental", hypervisor.WithMemory)
	if err := errors.Join(err, l.admin.Execute(l.ctx, "cont", nil, nil)); err != nil {
		t.Fatal(err)
	}
	if len(paused.Disks) != 2 || paused.SnapshotMode != "with-memory" || paused.SnapshotModeAchieved != "crash-consistent" ||
		!strings.Contains(strings.Join(paused.Warnings, ";"), "not running") {
		t.Fatalf("with-memory of a paused VM: %d streams, requested %q achieved %q, warnings %v",
			len(paused.Disks), paused.SnapshotMode, paused.SnapshotModeAchieved, paused.Warnings)
	}
	l.assertClean()
}
