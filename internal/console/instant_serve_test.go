package console_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestConsoleInstantServeAgain: an instant recovery started in the
// console outlives the server that served its disks. After the server
// restarts, the Restore page shows the session's disks as not served and
// offers to serve them again (instant-serve); once pressed, the session
// is served, its guest writes on, and it is discarded as any session.
func TestConsoleInstantServeAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	l := newLab(t)
	testutil.RequireBinary(t, "qemu-system-x86_64")
	qemuImg := testutil.RequireBinary(t, "qemu-img")
	img, err := guestvm.Build(ctx)
	if err != nil {
		if err == guestvm.ErrNoAssets && !testutil.Strict() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	disk := filepath.Join(l.dir, "web-2.qcow2")
	if out, err := exec.Command(qemuImg, "create", "-q", "-f", "qcow2", disk, "32M").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	vm, err := guestvm.Start(ctx, img, guestvm.Options{Name: "web-2", UUID: "5d1c2b3a-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
		Dir: filepath.Join(l.dir, "vm-web-2"), Mode: "write", Base: 64, Interval: 20 * time.Millisecond,
		Disks: []guestvm.Disk{{ID: "vda", Path: disk, Format: "qcow2"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	if _, err := vm.WaitConsole(ctx, "COFFER READY"); err != nil {
		t.Fatalf("%v\n%s", err, vm.Console())
	}
	l.coffer("init")
	l.coffer("backup", "vm", vm.QMPPath)
	vm.Kill()
	l.start()
	c := l.chrome()
	c.firstRun()
	token := l.adminToken()

	c.open("/ui/points")
	c.clickAway(`#recent a[href$="/vm/web-2"]`)
	c.clickAway(`#points a[href*="/p/"]`)
	s := c.instantStart(c.location(), token)
	t.Cleanup(func() { _ = qemu.Quit(context.Background(), s.QMPSocket) })
	waitFile(ctx, t, s.Console, "COFFER CHECK OK base=64")
	c.waitText("#session-"+s.ID, "disks served")
	if n := c.count("#serve-" + s.ID); n != 0 {
		t.Fatal("a session whose disks are served offers to serve them again")
	}

	l.restart()
	c.open("/ui/restore")
	c.waitText("#session-"+s.ID, "disks not served")
	c.shot("restore-instant-serve")
	b, _ := os.ReadFile(s.Console)
	c.run(chromedp.Click("#serve-" + s.ID))
	c.waitText("#instant-action", "Session "+s.ID+" is served again: web-2 resumes")
	c.open("/ui/restore")
	c.waitText("#session-"+s.ID, "disks served")
	waitFileFrom(ctx, t, s.Console, len(b), "COFFER WROTE")

	c.run(chromedp.Click("#discard-" + s.ID))
	c.waitText("#instant-action", "is discarded")
}

// restart stops the lab's server as its service manager would
// (SIGTERM) and starts it again on the same state.
func (l *lab) restart() {
	l.t.Helper()
	s := l.srv
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.done <- err // for the cleanup of its start
	case <-time.After(2 * time.Minute):
		l.t.Fatalf("the server did not stop:\n%s", s.log())
	}
	l.start()
}

// waitFileFrom waits until text appears in the file after its first from
// bytes.
func waitFileFrom(ctx context.Context, t *testing.T, path string, from int, text string) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		b, _ := os.ReadFile(path)
		if len(b) > from && strings.Contains(string(b[from:]), text) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %q in %s after byte %d: %v", text, path, from, ctx.Err())
		case <-tick.C:
		}
	}
}
