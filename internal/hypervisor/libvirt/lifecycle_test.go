package libvirt_test

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
)

// pausedIncremental takes chain a's incremental with the guest paused
// around it and compares the restored vda with the disk at that instant.
func (l *lab) pausedIncremental() *repo.Point {
	l.t.Helper()
	if err := l.admin.DomainSuspend(l.dom); err != nil {
		l.t.Fatal(err)
	}
	truth := l.liveImage()
	s, err := l.backup("a", "incremental", hypervisor.CrashConsistent)
	if rerr := l.admin.DomainResume(l.dom); err != nil || rerr != nil {
		l.t.Fatal(err, rerr)
	}
	if got := l.restoreDisk(s, "vda"); !bytes.Equal(got, truth) {
		l.t.Fatalf("point %s differs from the disk at its instant", s.ID.Short())
	}
	return s
}

func diskMode(s *repo.Point, key string) (string, string) {
	for _, d := range s.Disks {
		if d.Key == key {
			return d.Mode, d.Warning
		}
	}
	return "", "no such disk"
}

// A failed backup deletes the checkpoint it made; libvirt merges that
// checkpoint's bitmap into its parent, so the next incremental still holds
// the writes made after the failed one began.
func TestFailedBackupKeepsTracking(t *testing.T) {
	l := startLab(t)
	full, err := l.backup("a", "full", hypervisor.CrashConsistent)
	if err != nil {
		t.Fatal(err)
	}
	before := l.checkpoints()
	since := map[string]string{}
	for _, d := range full.Disks {
		if d.ChangeToken != "" {
			since[d.Key] = d.ChangeToken
		}
	}
	s, err := l.conn.Snapshot(l.ctx, l.ref, hypervisor.SnapshotRequest{SessionID: "fails", Chain: "a", Track: true, Since: since})
	if err != nil {
		t.Fatal(err)
	}
	if during := l.checkpoints(); len(during) != len(before)+1 {
		t.Fatalf("checkpoints during the session: %v", during)
	}
	l.waitWrites(2) // after the failed session's checkpoint began
	if _, err := s.Close(l.ctx, false); err != nil {
		t.Fatal(err)
	}
	if after := l.checkpoints(); !slices.Equal(after, before) {
		t.Fatalf("checkpoints after the failed backup: %v, before %v", after, before)
	}
	l.assertClean()
	inc := l.pausedIncremental()
	if m, w := diskMode(inc, "vda"); m != "incremental" {
		t.Fatalf("vda after a failed backup: %s (%s)", m, w)
	}
}

// Checkpoints are bitmaps in the qcow2 image: a domain shut down and
// started again still gets a correct incremental. A disk added since the
// last point is read in full, with a warning, and tracked from then on.
func TestRestartAndDiskAdded(t *testing.T) {
	l := startLab(t)
	if _, err := l.backup("a", "full", hypervisor.CrashConsistent); err != nil {
		t.Fatal(err)
	}
	l.waitWrites(1)
	// virsh destroy asks QEMU to quit (SIGTERM, which closes the images
	// cleanly and stores the bitmaps) before it kills it.
	if err := l.admin.DomainDestroy(l.dom); err != nil {
		t.Fatal(err)
	}
	from := len(l.console())
	if err := l.admin.DomainCreate(l.dom); err != nil {
		t.Fatal(err)
	}
	l.waitConsole("COFFER READY", from)
	l.waitWrites(1)
	inc := l.pausedIncremental()
	if m, w := diskMode(inc, "vda"); m != "incremental" {
		t.Fatalf("vda after a restart: %s (%s)", m, w)
	}

	vdc := filepath.Join(l.dir, "vdc.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", vdc, "16M").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	l.d.Chown(vdc)
	disk := fmt.Sprintf(`<disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source file='%s'/><target dev='vdc' bus='virtio'/></disk>`, vdc)
	if err := l.admin.DomainAttachDevice(l.dom, disk); err != nil {
		t.Fatal(err)
	}
	added := l.pausedIncremental()
	if m, w := diskMode(added, "vdc"); m != "full" || !strings.Contains(w, "added since the last backup") {
		t.Fatalf("added disk vdc: %s (%s)", m, w)
	}
	if m, _ := diskMode(added, "vda"); m != "incremental" {
		t.Fatalf("vda beside an added disk: %s", m)
	}
	next := l.pausedIncremental()
	if m, w := diskMode(next, "vdc"); m != "incremental" {
		t.Fatalf("vdc once tracked: %s (%s)", m, w)
	}
}
