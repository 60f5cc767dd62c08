package console_test

import (
	"bytes"
	"crypto/rand"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/testutil/vclab"
)

// TestConsoleRestoreOntoOriginal: a vSphere VM (vcsim) backed up, its disk
// written over since; the restore wizard's "Onto the original VM" refuses
// a confirmation that is not the VM's name at its step (no task, the
// disk untouched), its task fails and says why while the VM runs, and
// with the VM powered off and its name typed, the VM's disk holds the
// point's bytes again.
func TestConsoleRestoreOntoOriginal(t *testing.T) {
	l := newLab(t)
	vc := vclab.New(t, vclab.Start(t, 1, 0))
	vm := vc.VMs[0]
	disk := vc.Disk(vm.Name)
	backedUp := make([]byte, disk.Size)
	_, _ = rand.Read(backedUp[:disk.Size/2])
	vc.WriteFlat(disk, backedUp)
	l.config(vc.Connection("vc", filepath.Join(l.dir, "vc.password")) +
		"policies:\n  - name: p\n    connection: vc\n    select: {names: [" + vm.Name + "]}\n")
	l.coffer("init")
	l.coffer("run", "p")
	since := bytes.Repeat([]byte("written since the backup "), int(disk.Size)/25+1)[:disk.Size]
	vc.WriteFlat(disk, since)

	l.start()
	c := l.chrome()
	c.firstRun()
	var points []api.BackupPoint
	if code := l.get(l.adminToken(), "/api/v1/repositories/default/points", &points); code != 200 || len(points) != 1 {
		t.Fatalf("points: %d %+v", code, points)
	}
	c.open("/ui/points/default/p/" + points[0].ID + "/restore")
	c.run(chromedp.Click("#what-original"), chromedp.WaitVisible("#restore-form"))
	wizard := c.location()
	c.waitText("#restore-form", "overwritten")

	// A confirmation that is not the VM's name: refused at the step.
	c.retype("#r-confirm", "app-02")
	c.run(chromedp.Click("#restore-start"))
	c.waitText("#restore-result", "type the VM's name, "+vm.Name)
	if loc := c.location(); loc != wizard || !bytes.Equal(vc.ReadFlat(disk), since) {
		t.Fatalf("a refused confirmation went to %s or changed the disk", loc)
	}
	c.shot("restore-original")

	// Running: the task fails, saying so; the disk is untouched.
	vc.Power(vm, true)
	c.retype("#r-confirm", vm.Name)
	c.clickAway("#restore-start")
	if loc := c.location(); !strings.Contains(loc, "/ui/tasks/") {
		t.Fatalf("the restore opened %s, not its task", loc)
	}
	c.waitText("#task-status", "failed")
	c.finalDetails()
	c.waitText("main", "running")
	if !bytes.Equal(vc.ReadFlat(disk), since) {
		t.Fatal("a restore refused for a running VM changed its disk")
	}

	// Powered off: the disk holds the point's bytes again.
	vc.Power(vm, false)
	c.run(chromedp.Navigate(wizard), chromedp.WaitVisible("#restore-form"))
	c.retype("#r-confirm", vm.Name)
	c.clickAway("#restore-start")
	c.waitText("#task-status", "success")
	// The live log has every line, the last ones too (the stream gives a
	// task that ended its log before its final state).
	c.waitText("#log", "writing disk")
	if !bytes.Equal(vc.ReadFlat(disk), backedUp) {
		t.Fatal("the VM's disk after a restore onto the original differs from the point")
	}
}
