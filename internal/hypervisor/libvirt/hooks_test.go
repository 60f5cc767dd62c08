package libvirt_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/backup/backuptest"
	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// TestGuestHooksThroughLibvirt: a guest hook runs through libvirt's agent
// passthrough; its pre command's marker, flushed to vdb before the
// checkpoint, is in the restored point, its post command's is not.
func TestGuestHooksThroughLibvirt(t *testing.T) {
	l := startLab(t)
	mark := func(text string, off int) []string {
		return []string{"/bin/sh", "-c", fmt.Sprintf("printf %s | dd of=/dev/vdb bs=1 seek=%d conv=fsync 2>/dev/null", text, off)}
	}
	s, err := backuptest.BackupVM(t, l.repo("a"), l.conn, backup.VMRequest{Connection: "lab", VM: l.ref, Chain: "a",
		SnapshotMode: hypervisor.Quiesced, Quiesce: hypervisor.QuiesceRequired, Tags: map[string]string{"chain": "a"},
		Hooks: []backup.Hook{{Name: "db", InGuest: true, Timeout: time.Minute, Pre: mark("PRE-MARK", 1<<20), Post: mark("POST-MARK", 2<<20)}}})
	if err != nil {
		t.Fatalf("%v\n%s", err, l.console())
	}
	if s.Hooks != backup.HooksOK {
		t.Fatalf("point: hooks %q, warnings %q", s.Hooks, s.Warnings)
	}
	img := l.restoreDisk(s, "vdb")
	at := func(off int, text string) bool { return bytes.Equal(img[off:off+len(text)], []byte(text)) }
	if !at(1<<20, "PRE-MARK") || at(2<<20, "POST-MARK") {
		t.Fatalf("restored vdb: pre marker %v, post marker %v (want true, false)", at(1<<20, "PRE-MARK"), at(2<<20, "POST-MARK"))
	}
	l.assertClean()
}
