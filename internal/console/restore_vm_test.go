package console_test

import (
	"context"

	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestConsoleRestoreVMAndInstant: a real QEMU guest (TCG) backed up, then
// through the console's restore wizard: restored as a new VM that boots
// and finds its disk as backed up (the guest checks its data set); started
// by instant recovery from the backup, watched on the Restore page,
// committed onto storage while it runs (the committed disk holds the
// guest's data set), and in a second run discarded (its VM stopped, what
// it wrote deleted).
func TestConsoleRestoreVMAndInstant(t *testing.T) {
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
	disk := filepath.Join(l.dir, "web-1.qcow2")
	if out, err := exec.Command(qemuImg, "create", "-q", "-f", "qcow2", disk, "32M").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	vm, err := guestvm.Start(ctx, img, guestvm.Options{Name: "web-1", UUID: "3f0b8e2a-1c4d-4e5f-8a9b-0c1d2e3f4a5b",
		Dir: filepath.Join(l.dir, "vm-web-1"), Mode: "write", Base: 64, Interval: 20 * time.Millisecond,
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
	vm.Kill() // the disaster: the original is gone
	restores := filepath.Join(l.vars["COFFER_STATE_DIR"], "restores")
	l.start()
	c := l.chrome()
	c.firstRun()

	// As a new VM, started: it boots and its data set is the backup's.
	c.open("/ui/points")
	c.clickAway(`#recent a[href$="/vm/web-1"]`)
	c.clickAway(`#points a[href*="/p/"]`)
	pointPage := c.location()
	c.clickAway("#restore")
	c.run(chromedp.Click("#what-vm"), chromedp.WaitVisible("#restore-form"))
	c.retype("#r-dir", "web-1-new")
	c.shot("restore-vm")
	c.clickAway("#restore-start")
	if loc := c.location(); !strings.Contains(loc, "/ui/tasks/") {
		t.Fatalf("the restore opened %s, not its task", loc)
	}
	c.waitText("#task-status", "success")
	c.waitText("#log", "started web-1-restored")
	newVM := filepath.Join(restores, "web-1-new")
	t.Cleanup(func() { _ = qemu.Quit(context.Background(), filepath.Join(newVM, "qmp.sock")) })
	waitFile(ctx, t, filepath.Join(newVM, "console.log"), "COFFER CHECK OK base=64")
	if err := qemu.Quit(ctx, filepath.Join(newVM, "qmp.sock")); err != nil {
		t.Fatal(err)
	}

	// Instant recovery, committed while it runs.
	token := l.adminToken()
	s := c.instantStart(pointPage, token)
	t.Cleanup(func() { _ = qemu.Quit(context.Background(), s.QMPSocket) })
	waitFile(ctx, t, s.Console, "COFFER CHECK OK base=64")
	c.waitText("#session-"+s.ID, "VM running")
	c.waitText("#session-"+s.ID, "disks served")
	c.shot("restore-instant")
	c.retype("#to-"+s.ID, "production")
	c.run(chromedp.SetValue("#fmt-"+s.ID, "raw"))
	c.clickAway("#commit-" + s.ID)
	if loc := c.location(); !strings.Contains(loc, "/ui/tasks/") {
		t.Fatalf("the commit opened %s, not its task", loc)
	}
	c.waitText("#task-status", "success")
	c.open("/ui/restore")
	c.waitText("#session-"+s.ID, "committed")
	c.waitText("#session-"+s.ID, "VM running")
	c.shot("restore-instant-committed")
	c.run(chromedp.Click("#discard-" + s.ID))
	c.waitText("#instant-action", "runs on from its committed disks")
	if err := qemu.Quit(ctx, s.QMPSocket); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(restores, "production", "vda.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	if rep, err := guestvm.CheckDisk(f, fi.Size()); err != nil || rep.Base != 64 {
		t.Fatalf("the committed disk: %+v %v", rep, err)
	}

	// A second instant recovery, discarded: the VM stops, its overlay goes.
	d := c.instantStart(pointPage, token)
	t.Cleanup(func() { _ = qemu.Quit(context.Background(), d.QMPSocket) })
	c.waitText("#session-"+d.ID, "VM running")
	c.run(chromedp.Click("#discard-" + d.ID))
	c.waitText("#instant-action", "is discarded")
	c.open("/ui/restore")
	c.run(chromedp.WaitVisible("#no-sessions"))
	for _, disk := range d.Disks {
		if _, err := os.Stat(disk.Overlay); !os.IsNotExist(err) {
			t.Fatalf("the discarded session's overlay %s: %v", disk.Overlay, err)
		}
	}
	var left []api.InstantSession
	if code := l.get(token, "/api/v1/instant", &left); code != 200 || len(left) != 0 {
		t.Fatalf("instant-list after discard (%d): %+v", code, left)
	}
}

// instantStart starts an instant recovery of the point from its restore
// wizard and returns the session the browser was sent to, as instant-list
// has it.
func (c *chrome) instantStart(pointPage, token string) api.InstantSession {
	c.t.Helper()
	c.run(chromedp.Navigate(pointPage+"/restore?what=instant"), chromedp.WaitVisible("#restore-form"))
	var vsphereFields bool
	c.run(chromedp.Evaluate(`!!document.querySelector("#r-vsphere, #r-host, #r-nfs-address")`, &vsphereFields))
	if vsphereFields {
		c.t.Fatal("a QEMU point's instant recovery asks where a vSphere VM runs")
	}
	c.clickAway("#restore-start")
	_, id, ok := strings.Cut(c.location(), "/ui/restore#session-")
	if !ok {
		c.t.Fatalf("instant recovery opened %s", c.location())
	}
	var list []api.InstantSession
	if code := c.l.get(token, "/api/v1/instant", &list); code != 200 {
		c.t.Fatalf("instant-list: %d", code)
	}
	for _, s := range list {
		if s.ID == id && s.State == "running" {
			return s
		}
	}
	c.t.Fatalf("no running session %s in %+v", id, list)
	return api.InstantSession{}
}

// waitFile waits until text appears in the file at path (a daemonized
// QEMU's serial console): it polls, as the file has no change
// notification that works on every file system the tests run on.
func waitFile(ctx context.Context, t *testing.T, path, text string) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), text) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %q in %s: %v\n%s", text, path, ctx.Err(), b)
		case <-tick.C:
		}
	}
}
