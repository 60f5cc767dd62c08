package qemu_test

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/backup/backuptest"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
)

// TestGuestHooksAroundTheSnapshot: a guest hook's pre command writes a
// marker to the guest's disk through the guest agent, and the restored
// point holds it; its post command's marker, written after the instant,
// is on the live disk but not in the point. A failing pre command makes a
// point that records it.
func TestGuestHooksAroundTheSnapshot(t *testing.T) {
	l := startLab(t, "")
	// mark writes text at off on vdb and flushes it to the disk, the way
	// a database's checkpoint reaches its files before a snapshot.
	mark := func(text string, off int) []string {
		return []string{"/bin/sh", "-c", fmt.Sprintf("printf %s | dd of=/dev/vdb bs=1 seek=%d conv=fsync 2>/dev/null", text, off)}
	}
	backupWith := func(h backup.Hook) *repo.Point {
		t.Helper()
		h.InGuest, h.Timeout = true, time.Minute
		s, err := backuptest.BackupVM(t, l.repo, l.conn, backup.VMRequest{Connection: "lab", VM: l.ref,
			SnapshotMode: hypervisor.Quiesced, Quiesce: hypervisor.QuiesceRequired, Hooks: []backup.Hook{h}})
		if err != nil {
			t.Fatalf("%v\n%s", err, l.vm.Console())
		}
		return s
	}
	at := func(img []byte, off int, text string) bool { return bytes.Equal(img[off:off+len(text)], []byte(text)) }

	s := backupWith(backup.Hook{Name: "db", Pre: mark("PRE-MARK", 1<<20), Post: mark("POST-MARK", 2<<20)})
	if s.Hooks != backup.HooksOK || s.SnapshotModeAchieved != "quiesced" {
		t.Fatalf("point: hooks %q, achieved %q, warnings %q", s.Hooks, s.SnapshotModeAchieved, s.Warnings)
	}
	restored, err := os.ReadFile(l.restoreDisk(s, "vdb"))
	if err != nil {
		t.Fatal(err)
	}
	if !at(restored, 1<<20, "PRE-MARK") || at(restored, 2<<20, "POST-MARK") {
		t.Fatalf("restored vdb: pre marker %v, post marker %v (want true, false)", at(restored, 1<<20, "PRE-MARK"), at(restored, 2<<20, "POST-MARK"))
	}
	if live := l.liveImage("vdb"); !at(live, 2<<20, "POST-MARK") {
		t.Fatal("the post command's marker is not on the live disk")
	}
	l.assertClean()

	failed := backupWith(backup.Hook{Name: "db", Pre: []string{"/bin/sh", "-c", "echo flush failed >&2; exit 3"}, Post: mark("POST-AGAIN", 3<<20)})
	if failed.Hooks != backup.HooksPreFailed || len(failed.Warnings) == 0 {
		t.Fatalf("point after a failed pre command: hooks %q, warnings %q", failed.Hooks, failed.Warnings)
	}
	if live := l.liveImage("vdb"); !at(live, 3<<20, "POST-AGAIN") {
		t.Fatal("the post command did not run after a failed pre command")
	}
	t.Logf("warning: %s", failed.Warnings[0])
	l.assertClean()
}
