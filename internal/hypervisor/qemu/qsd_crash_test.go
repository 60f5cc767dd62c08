package qemu_test

import (
	"context"
	"encoding/json"
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
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/nbd"
	"github.com/coffer-backup/coffer/internal/qmp"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// assertDaemonClean checks through the test's own monitor that nothing of
// coffer's is left on a daemon but its change-tracking bitmaps (the full
// anchor and the latest incremental), and that its own export is back on
// its disk node.
func assertDaemonClean(ctx context.Context, t *testing.T, q *qsdInstance) {
	t.Helper()
	adm, err := qmp.Dial(ctx, q.admin)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	for _, n := range namedNodes(ctx, t, adm) {
		if strings.HasPrefix(n.Name, "coffer-") {
			t.Fatalf("stray block node %s", n.Name)
		}
		count := 0
		for _, b := range n.Bitmaps {
			if strings.HasPrefix(b.Name, "coffer-") {
				count++
			}
		}
		if count > 2 {
			t.Fatalf("node %s has %d coffer bitmaps: %+v", n.Name, count, n.Bitmaps)
		}
	}
	var exports []struct {
		ID   string `json:"id"`
		Node string `json:"node-name"`
	}
	if err := adm.Execute(ctx, "query-block-exports", nil, &exports); err != nil {
		t.Fatal(err)
	}
	if len(exports) != 1 || exports[0].ID != "vda" || exports[0].Node != "disk0" {
		t.Fatalf("exports %+v", exports)
	}
	var jobs []any
	if err := adm.Execute(ctx, "query-block-jobs", nil, &jobs); err != nil || len(jobs) != 0 {
		t.Fatalf("block jobs %v %v", jobs, err)
	}
}

func backupOnce(t *testing.T, r *repo.Repository, conn hypervisor.Connector, ref hypervisor.VMRef, mode string) *repo.Point {
	t.Helper()
	s, err := backuptest.BackupVM(t, r, conn, backup.VMRequest{Connection: "lab", VM: ref, Mode: mode,
		SnapshotMode: hypervisor.CrashConsistent})
	if err != nil {
		t.Fatalf("%s backup: %v", mode, err)
	}
	return s
}

// restoreFile restores vda of a point with restore.ToFile and reads it.
func restoreFile(ctx context.Context, t *testing.T, r *repo.Repository, s *repo.Point) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "vda.raw")
	if _, err := restore.ToFile(ctx, r, s, s.Disks[0], out, restore.FileOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestQSDKilledCofferCleanedUp kills a coffer process (SIGKILL) in the
// middle of an incremental backup of a storage daemon that keeps being
// written to; CleanupLeftovers removes its backup job (and with it the
// filter above the disk), overlay, export and temporary bitmap, and the
// next incremental is exact.
func TestQSDKilledCofferCleanedUp(t *testing.T) {
	if sock := os.Getenv("COFFER_TEST_QSD_QMP"); sock != "" {
		qsdChild(t, sock)
		return
	}
	dir := t.TempDir()
	q := startQSD(t, dir, "db-1", 40<<20, true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := startWriterFilled(ctx, t, q, 42, 5*time.Millisecond, true) // a full reads it all
	state := filepath.Join(dir, "state")
	conn, err := qemu.New(qemu.Config{Sockets: []string{q.qmp}, StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	vms, err := conn.Inventory(ctx)
	if err != nil || len(vms) != 1 || vms[0].Name != "db-1" {
		t.Fatalf("inventory %+v %v", vms, err)
	}
	r := newTestRepo(t)
	lo := w.acked.Load()
	full := backupOnce(t, r, conn, vms[0].VMRef, "full")
	w.checkPoint(t, "full", restoreFile(ctx, t, r, full), lo, w.issued())

	tokens, _ := json.Marshal(map[string]string{"vda": full.Disks[0].ChangeToken})
	cmd := exec.Command(os.Args[0], "-test.run=^TestQSDKilledCofferCleanedUp$")
	cmd.Env = append(os.Environ(), "COFFER_TEST_QSD_QMP="+q.qmp, "COFFER_TEST_QSD_STATE="+state, "COFFER_TEST_QSD_SINCE="+string(tokens))
	out, err := cmd.CombinedOutput()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("child did not die by signal: %v\n%s", err, out)
	}
	if ents, _ := os.ReadDir(filepath.Join(state, "journal")); len(ents) != 1 {
		t.Fatalf("expected the killed session's journal, found %v", ents)
	}
	left, err := conn.CleanupLeftovers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, l := range left {
		kinds[l.Kind] = true
	}
	if !kinds["block-job"] || !kinds["export"] || !kinds["overlay-file"] || !kinds["bitmap"] {
		t.Fatalf("cleanup reported %+v", left)
	}
	for _, sub := range []string{"journal", "fleece"} {
		if ents, _ := os.ReadDir(filepath.Join(state, sub)); len(ents) != 0 {
			t.Fatalf("leftover files in %s: %v", sub, ents)
		}
	}
	assertDaemonClean(ctx, t, q)
	if err := w.failure(); err != nil {
		t.Fatalf("writes failed across the crash and cleanup: %v", err)
	}
	lo = w.acked.Load()
	inc := backupOnce(t, r, conn, vms[0].VMRef, "incremental")
	if inc.Mode != "incremental" || len(inc.Warnings) != 0 || inc.BytesRead >= full.BytesRead {
		t.Fatalf("incremental after cleanup: %s %v, read %d (full %d)", inc.Mode, inc.Warnings, inc.BytesRead, full.BytesRead)
	}
	k := w.checkPoint(t, "incremental after cleanup", restoreFile(ctx, t, r, inc), lo, w.issued())
	t.Logf("cleaned up %d objects; full read %d bytes, incremental %d (at write %d)", len(left), full.BytesRead, inc.BytesRead, k)
	assertDaemonClean(ctx, t, q)
	if err := w.halt(); err != nil {
		t.Fatal(err)
	}
}

// qsdChild is the coffer that gets killed: it snapshots, starts reading,
// and dies without closing anything.
func qsdChild(t *testing.T, sock string) {
	conn, err := qemu.New(qemu.Config{Sockets: []string{sock}, StateDir: os.Getenv("COFFER_TEST_QSD_STATE")})
	if err != nil {
		t.Fatal(err)
	}
	var since map[string]string
	if err := json.Unmarshal([]byte(os.Getenv("COFFER_TEST_QSD_SINCE")), &since); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sess, err := conn.Snapshot(ctx, hypervisor.VMRef{ID: "qsd:" + sock}, hypervisor.SnapshotRequest{SessionID: "killed",
		Mode: hypervisor.CrashConsistent, Track: true, Since: since})
	if err != nil {
		t.Fatal(err)
	}
	rd, err := sess.OpenDisk(ctx, "vda")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rd.ReadAt(make([]byte, 1<<20), 0); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
}

// TestQSDFleecingSpaceFullFailsWrites documents the storage daemon path's
// one difference from the VM path: with the fleecing space (a 2 MiB tmpfs)
// full, the backup job's copy-before-write fails the writer's write (QEMU
// 7.2's blockdev-backup has no on-cbw-error), while the snapshot stays
// exact; closing the session leaves nothing behind.
func TestQSDFleecingSpaceFullFailsWrites(t *testing.T) {
	testutil.RequireRoot(t)
	state := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", state).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", state).Run() })
	q := startQSD(t, t.TempDir(), "db-2", 32<<20, true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := startWriterFilled(ctx, t, q, 9, time.Millisecond, true)
	conn, err := qemu.New(qemu.Config{Sockets: []string{q.qmp}, StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	lo := w.acked.Load()
	sess, err := conn.Snapshot(ctx, hypervisor.VMRef{ID: "qsd:" + q.qmp}, hypervisor.SnapshotRequest{SessionID: "space",
		Mode: hypervisor.CrashConsistent, Track: true})
	if err != nil {
		t.Fatal(err)
	}
	hi := w.issued()
	// 2 MiB hold 32 preserved blocks at most: the writer soon fails.
	select {
	case <-w.done:
	case <-ctx.Done():
		t.Fatal("writes kept succeeding with the fleecing space full")
	}
	var ne *nbd.Error
	if werr := w.failure(); !errors.As(werr, &ne) {
		t.Fatalf("writer ended with %v, want an NBD error reply", werr)
	}
	r, err := sess.OpenDisk(ctx, "vda")
	if err != nil {
		t.Fatal(err)
	}
	img := make([]byte, r.Size())
	_, rerr := r.ReadAt(img, 0)
	r.Close()
	if _, err := sess.Close(ctx, false); err != nil {
		t.Fatal(err)
	}
	if rerr != nil {
		t.Fatalf("reading the snapshot: %v", rerr)
	}
	k := w.checkPoint(t, "snapshot with the fleecing space full", img, lo, hi)
	t.Logf("writer failed after %d writes (snapshot at write %d): %v", w.issued(), k, w.failure())
	assertDaemonClean(ctx, t, q)
	for _, sub := range []string{"journal", "fleece"} {
		if ents, _ := os.ReadDir(filepath.Join(state, sub)); len(ents) != 0 {
			t.Fatalf("leftover files in %s: %v", sub, ents)
		}
	}
}
