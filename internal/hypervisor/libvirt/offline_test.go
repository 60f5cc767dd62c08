package libvirt_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// checkOffline backs up the lab's domain while it is shut off, after a
// live full of chain "o": two offline incrementals (the first one with
// `virsh start` tried in the middle of its read, which QEMU's image
// lock refuses), each equal to the disk at rest and reading only what
// changed; then the domain started and the guest writing, and a live
// incremental reading only what changed since the offline checkpoint
// (QEMU loaded the bitmap qemu-img added, and recorded into it).
func (l *lab) checkOffline(t *testing.T) {
	l.checkOfflineRefusals(t)
	atRest := l.liveImage()
	var err error

	var started error
	var once sync.Once
	conn := &midRead{Connector: l.conn, hook: func() {
		once.Do(func() { started = l.admin.DomainCreate(l.dom) })
	}}
	inc, err := l.backupThrough(conn, "o", "incremental", hypervisor.CrashConsistent)
	if err != nil {
		t.Fatalf("offline incremental: %v", err)
	}
	// QEMU exits on the lock; libvirt names the lock when it read QEMU's
	// message in time, and only the exit when it did not (a CI run under
	// load). The domain's state below shows the start was refused.
	if started == nil || !strings.Contains(started.Error(), "lock") && !strings.Contains(started.Error(), "process exited while connecting to monitor") {
		t.Fatalf("the domain started in the middle of the offline read: %v", started)
	}
	t.Logf("virsh start during the offline read: %v", started)
	if st := l.domState(); st != golibvirt.DomainShutoff {
		t.Fatalf("domain state %d after the refused start", st)
	}
	d := diskOf(inc, "vda")
	if inc.SnapshotModeAchieved != "crash-consistent" || d.Mode != "incremental" || d.Warning != "" || d.BytesRead >= d.Size || d.ChangeCheckDiffer != 0 {
		t.Fatalf("offline incremental: achieved %q, vda %s (%q), read %d of %d bytes", inc.SnapshotModeAchieved, d.Mode, d.Warning, d.BytesRead, d.Size)
	}
	if !strings.Contains(strings.Join(inc.Warnings, " "), "shut off (destroyed)") {
		t.Fatalf("offline point's warnings: %q", inc.Warnings)
	}
	if !bytes.Equal(l.restoreDisk(inc, "vda"), atRest) {
		t.Fatal("the offline incremental differs from the disk at rest")
	}
	cps := chainCheckpoints(l.checkpoints(), "o")
	if len(cps) != 2 {
		t.Fatalf("checkpoints after the offline incremental: %v", l.checkpoints())
	}

	// A second one reads nothing (the disks did not change), and replaces
	// the first offline checkpoint, which libvirt cannot delete of a
	// shut-off domain: coffer removes its bitmap with qemu-img.
	inc2, err := l.backup("o", "incremental", hypervisor.CrashConsistent)
	if err != nil {
		t.Fatal(err)
	}
	// (It reads only the spans the change check samples.)
	if d := diskOf(inc2, "vda"); d.Mode != "incremental" || d.BytesNew != 0 || d.ChangeCheckDiffer != 0 {
		t.Fatalf("second offline incremental of vda: %s, %d new bytes, %d checked spans differed", d.Mode, d.BytesNew, d.ChangeCheckDiffer)
	}
	after := chainCheckpoints(l.checkpoints(), "o")
	if len(after) != 2 || after[0] != cps[0] || after[1] == cps[1] {
		t.Fatalf("checkpoints after the second offline incremental: %v (before %v)", after, cps)
	}
	if out, _ := exec.Command("qemu-img", "info", "-U", l.dir+"/vda.qcow2").CombinedOutput(); strings.Count(string(out), "name: coffer-o") != 2 {
		t.Fatalf("bitmaps in vda after the offline prune:\n%s", out)
	}
	l.assertNoSessionFiles()

	// Started, the guest writes into the offline checkpoint's bitmap.
	if err := l.admin.DomainCreate(l.dom); err != nil {
		t.Fatal(err)
	}
	l.waitConsole("COFFER READY", len(l.console()))
	l.waitWrites(1)
	if err := l.admin.DomainSuspend(l.dom); err != nil {
		t.Fatal(err)
	}
	truth := l.liveImage()
	live, err := l.backup("o", "incremental", hypervisor.CrashConsistent)
	if rerr := l.admin.DomainResume(l.dom); err != nil || rerr != nil {
		t.Fatal(err, rerr)
	}
	if d := diskOf(live, "vda"); d.Mode != "incremental" || d.Warning != "" || d.BytesNew == 0 || d.BytesRead >= d.Size || d.ChangeCheckDiffer != 0 {
		t.Fatalf("live incremental after the offline one: %s (%q), read %d of %d bytes, %d new, %d checked spans differed", d.Mode, d.Warning, d.BytesRead, d.Size, d.BytesNew, d.ChangeCheckDiffer)
	}
	if !bytes.Equal(l.restoreDisk(live, "vda"), truth) {
		t.Fatal("the live incremental after the offline one differs from the disk at its instant")
	}
	l.assertClean()
}

// domState is the domain's state.
func (l *lab) domState() golibvirt.DomainState {
	l.t.Helper()
	st, _, err := l.admin.DomainGetState(l.dom, 0)
	if err != nil {
		l.t.Fatal(err)
	}
	return golibvirt.DomainState(st)
}

// midRead calls hook at the first read of a disk.
type midRead struct {
	hypervisor.Connector
	hook func()
}

func (c *midRead) Snapshot(ctx context.Context, ref hypervisor.VMRef, req hypervisor.SnapshotRequest) (hypervisor.Session, error) {
	s, err := c.Connector.Snapshot(ctx, ref, req)
	if err != nil {
		return nil, err
	}
	return &midReadSession{Session: s, hook: c.hook}, nil
}

type midReadSession struct {
	hypervisor.Session
	hook func()
}

func (s *midReadSession) OpenDisk(ctx context.Context, key string) (hypervisor.DiskReader, error) {
	r, err := s.Session.OpenDisk(ctx, key)
	if err != nil {
		return nil, err
	}
	return &midReadReader{DiskReader: r, hook: s.hook}, nil
}

type midReadReader struct {
	hypervisor.DiskReader
	hook func()
}

func (r *midReadReader) ReadAt(p []byte, off int64) (int, error) {
	r.hook()
	return r.DiskReader.ReadAt(p, off)
}

// checkOfflineRefusals: a shut-off domain's snapshot that must fail
// leaves nothing: a required quiesce of a destroyed domain, and images a
// QEMU holds (a domain started as coffer looked at it).
func (l *lab) checkOfflineRefusals(t *testing.T) {
	// Required quiesce of a destroyed domain: its disks were not shut
	// down cleanly, so it fails before anything is made.
	_, err := l.conn.Snapshot(l.ctx, l.ref, hypervisor.SnapshotRequest{SessionID: "q", Chain: "o", Mode: hypervisor.Quiesced,
		Quiesce: hypervisor.QuiesceRequired, Track: true})
	if !errors.Is(err, hypervisor.ErrQuiesceFailed) {
		t.Fatalf("required quiesce of a destroyed domain: %v", err)
	}
	if cps := chainCheckpoints(l.checkpoints(), "o"); len(cps) != 1 {
		t.Fatalf("checkpoints after the refused snapshot: %v", l.checkpoints())
	}
	// A QEMU holding vda (a domain started as coffer looked at it): the
	// snapshot fails as transient, and leaves nothing.
	img := filepath.Join(l.dir, "vda.qcow2")
	sock := filepath.Join(l.dir, "hold.sock")
	holder := exec.Command("qemu-nbd", "--persistent", "--format=qcow2", "--socket="+sock, img)
	var stderr bytes.Buffer
	holder.Stderr = &stderr
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	for { // qemu-nbd listens once it holds the image
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if l.ctx.Err() != nil {
			t.Fatalf("qemu-nbd never listened: %s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
	_, err = l.conn.Snapshot(l.ctx, l.ref, hypervisor.SnapshotRequest{SessionID: "held", Chain: "o", Track: true,
		Since: map[string]string{}})
	holder.Process.Signal(syscall.SIGTERM) // not killed: it stores the bitmaps it had in use
	holder.Wait()
	if !errors.Is(err, hypervisor.ErrTransient) || !strings.Contains(err.Error(), "a retry reads it live") {
		t.Fatalf("offline snapshot of an image QEMU holds: %v", err)
	}
	if cps := chainCheckpoints(l.checkpoints(), "o"); len(cps) != 1 {
		t.Fatalf("checkpoints after the failed snapshot: %v", l.checkpoints())
	}
	l.assertNoSessionFiles()
}
