package console_test

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestConsoleMedia: the Media page shows a configured virtual tape
// library's drives and slots (a WORM cartridge marked) and its
// drive-limit, and a real library's changer and slots (mtx stands in);
// its copy form
// copies a backup point to a pool in a task whose live page the browser
// follows; the volume written is then listed in its pool with its
// protection, as the API lists it; the volume's page lists the point, and
// its restore form restores it from tape in a task, byte for byte into
// the server's restore directory; verify reads the volume back in a task.
func TestConsoleMedia(t *testing.T) {
	l := newLab(t)
	img := filepath.Join(l.dir, "web.img")
	data := make([]byte, 3<<20)
	_, _ = rand.Read(data)
	if err := os.WriteFile(img, data, 0o644); err != nil {
		t.Fatal(err)
	}
	tapes := filepath.Join(l.dir, "vtl")
	// A real library beside it, whose changer is a stand-in mtx.
	fake := testutil.NewFakeMtx(t, 1, []string{"CFR901L8"}, 1)
	l.vars["PATH"] = fake.Bin + string(os.PathListSeparator) + os.Getenv("PATH")
	l.config("media-libraries:\n  - {name: tapes, kind: vtl, directory: " + tapes + ", drive-limit: 1}\n" +
		"  - {name: robot, kind: mtx, changer: " + fake.Changer + ", drives: [{number: 0, device: " + filepath.Join(l.dir, "nst0") + "}]}\n")
	l.coffer("init")
	l.coffer("backup", "disk", img, "--name", "web")
	l.coffer("media", "vtl", "create", tapes, "--drives", "2", "--slots", "4", "--capacity", "32MiB")
	l.coffer("media", "vtl", "add", tapes, "CFR001L8", "--slot", "1")
	l.coffer("media", "vtl", "add", tapes, "CFR002L8", "--slot", "2", "--worm")
	l.start()
	c := l.chrome()
	c.firstRun()

	c.open("/ui/media")
	c.waitText("#no-volumes", "no volume")
	if slots := c.text("#slots-tapes"); !strings.Contains(slots, "CFR001L8") || !strings.Contains(slots, "CFR002L8 WORM") ||
		strings.Contains(slots, "CFR001L8 WORM") {
		t.Fatalf("the library's slots: %q", slots)
	}
	if drives := c.text("#drives-tapes"); !strings.Contains(drives, "empty") {
		t.Fatalf("the library's drives: %q", drives)
	}
	if robot := c.text("#library-robot"); !strings.Contains(robot, "tape library, changer "+fake.Changer+" (mtx)") ||
		!strings.Contains(c.text("#slots-robot"), "CFR901L8") {
		t.Fatalf("the real library: %q", robot)
	}
	// Two drives: the form offers to write through both (one point
	// takes one), and says that its drive-limit lets one write at once.
	if form := c.text("#copy-tapes"); !strings.Contains(form, "at most 1 at once (the library's drive-limit") {
		t.Fatalf("the copy form: %q", form)
	}
	c.run(chromedp.SendKeys("#c-pool-tapes", "weekly"), chromedp.SendKeys("#c-ret-tapes", "7"))
	c.retype("#c-drives-tapes", "2")
	c.clickAway("#copy-start-tapes")
	if loc := c.location(); !strings.Contains(loc, "/ui/tasks/") {
		t.Fatalf("the copy opened %s, not its task", loc)
	}
	c.waitText("#task-status", "success")
	c.finalDetails()
	c.waitText("main", "media-copy")

	tok := l.adminToken()
	var vols []api.MediaVolume
	if code := l.get(tok, "/api/v1/media/volumes?pool=weekly", &vols); code != 200 || len(vols) != 1 || vols[0].WORM {
		t.Fatalf("the API's volumes after the copy: %d %+v", code, vols)
	}
	vol := vols[0]
	c.open("/ui/media")
	row := c.text("#volumes-weekly")
	if !strings.Contains(row, vol.Barcode) || !strings.Contains(row, "tapes") || !strings.Contains(row, "left)") || !strings.Contains(row, "appendable") {
		t.Fatalf("the pool's volumes: %q", row)
	}
	c.shot("media")

	c.clickAway(`#volumes-weekly a[href$="/` + vol.Barcode + `"]`)
	var points []api.BackupPoint
	if code := l.get(tok, "/api/v1/repositories/default/points", &points); code != 200 || len(points) != 1 {
		t.Fatalf("points: %d %+v", code, points)
	}
	short := points[0].ID[:8]
	if got := c.text("#contents"); !strings.Contains(got, short) || !strings.Contains(got, "web") || !strings.Contains(got, "ends here") {
		t.Fatalf("the volume's contents: %q", got)
	}
	volumePage := c.location()
	// A target outside the restore directory is refused at the form, with
	// the API's reason, and starts no task.
	c.retype("#r-to", "../outside.img")
	c.run(chromedp.Click("#restore-start"))
	c.waitText("#restore-result", "climbs out of the server's restore directory")
	if loc := c.location(); loc != volumePage {
		t.Fatalf("a refused restore left the volume's page for %s", loc)
	}
	c.shot("media-volume")
	c.retype("#r-to", "web-from-tape.img")
	c.clickAway("#restore-start")
	if loc := c.location(); !strings.Contains(loc, "/ui/tasks/") {
		t.Fatalf("the restore opened %s, not its task", loc)
	}
	c.waitText("#task-status", "success")
	got, err := os.ReadFile(filepath.Join(l.vars["COFFER_STATE_DIR"], "restores", "web-from-tape.img"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the point restored from tape (%d bytes, %v) differs from the image (%d bytes)", len(got), err, len(data))
	}

	c.run(chromedp.Navigate(volumePage), chromedp.WaitVisible("#verify-volume"))
	c.clickAway("#verify-volume")
	c.waitText("#task-status", "success")
	c.finalDetails()
	c.waitText("main", "media-verify")
}
