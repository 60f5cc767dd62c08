package console_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsoleRestoreDisk: the restore wizard of a disk image's point
// offers what such a point can be restored as (not a VM, and says why),
// refuses a target outside the server's restore directory at its step
// (the API's message, no task), then restores the disk in a task whose
// live page the browser is sent to; the restored file holds the image's
// bytes, as does its test copy. The same target again fails in its task,
// which says why.
func TestConsoleRestoreDisk(t *testing.T) {
	l, _ := tourLab(t)
	img := filepath.Join(l.dir, "web-disk.raw")
	want, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	c := l.chrome()
	c.firstRun()

	// Repository → source → point → Restore….
	c.open("/ui/points")
	c.clickAway(`#recent a[href$="/vm/files"]`)
	c.clickAway(`#points a[href*="/p/"]`)
	c.clickAway("#restore")
	c.waitText("main", "holds disk images, not a VM")
	var vmChoices int
	c.run(chromedp.Evaluate(`document.querySelectorAll("#what-vm, #what-instant, #what-original").length`, &vmChoices))
	if vmChoices != 0 {
		t.Fatalf("the wizard offers %d VM restores for a disk image's point", vmChoices)
	}
	c.run(chromedp.Click("#what-disk"), chromedp.WaitVisible("#restore-form"))

	// A target outside the restore directory is refused at the step.
	c.retype("#r-to", "../outside.raw")
	c.run(chromedp.Click("#restore-start"))
	c.waitText("#restore-result", `climbs out of the server's restore directory`)
	if loc := c.location(); !strings.Contains(loc, "/restore") {
		t.Fatalf("a refused restore left the wizard for %s", loc)
	}
	c.shot("restore-wizard")

	// With a test copy: restored once, copied from the restored file.
	c.retype("#r-to", "web-disk.raw")
	c.retype("#r-copies", "2")
	c.clickAway("#restore-start")
	if loc := c.location(); !strings.Contains(loc, "/ui/tasks/") {
		t.Fatalf("the restore opened %s, not its task", loc)
	}
	taskPage := c.location()
	c.waitText("#task-status", "success")
	c.waitText("main", "web-disk-copy2.raw")
	c.shot("restore-task")
	for _, name := range []string{"web-disk.raw", "web-disk-copy2.raw"} {
		got, err := os.ReadFile(filepath.Join(l.vars["COFFER_STATE_DIR"], "restores", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s (%d bytes) differs from the image (%d bytes)", name, len(got), len(want))
		}
	}

	// Again onto the same file, without "replace": the task fails and
	// says why; the file is as restored.
	c.run(chromedp.NavigateBack(), chromedp.WaitVisible("#restore-form"))
	c.retype("#r-to", "web-disk.raw")
	c.clickAway("#restore-start")
	if loc := c.location(); loc == taskPage || !strings.Contains(loc, "/ui/tasks/") {
		t.Fatalf("the second restore opened %s", loc)
	}
	c.waitText("#task-status", "failed")
	c.finalDetails()
	c.waitText("main", "restore target exists")
	if again, _ := os.ReadFile(filepath.Join(l.vars["COFFER_STATE_DIR"], "restores", "web-disk.raw")); !bytes.Equal(again, want) {
		t.Fatal("a refused restore changed the file restored before")
	}
}

// finalDetails shows a finished task's final details: a page opened while
// it ran offers them when it ends (#ended); one opened after has them.
func (c *chrome) finalDetails() {
	c.t.Helper()
	var live bool
	c.run(chromedp.Evaluate(`!!document.querySelector("[sse-connect]")`, &live))
	if live {
		c.clickAway("#ended")
	}
}
