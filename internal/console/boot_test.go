package console_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestConsoleBoot: a real QEMU guest's point, never verified, is booted
// from its page (verify-boot as a task the browser follows); the page
// then says it boots, and its result page shows the ladder with each
// step's evidence, the screen (an image the browser loads) and the
// console's tail, as the API keeps them; the repository's list of
// results names it. The same page copies the point to a second
// repository and to a tape pool, each as a task, and the API finds the
// copies. (A short name: the boot's Unix sockets live under the test's
// directory, and a socket's path has at most 107 bytes.)
func TestConsoleBoot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	l := newLab(t)
	vm := startBootGuest(ctx, t, l)
	offsite, tapes := filepath.Join(l.dir, "offsite"), filepath.Join(l.dir, "vtl")
	l.config(fmt.Sprintf("repositories:\n  - {name: offsite, location: %s}\nmedia-libraries:\n  - {name: tapes, kind: vtl, directory: %s}\n", offsite, tapes))
	l.coffer("init")
	l.coffer("init", "--repo", offsite)
	l.coffer("backup", "vm", vm.QMPPath)
	vm.Kill()
	l.coffer("media", "vtl", "create", tapes, "--drives", "1", "--slots", "2", "--capacity", "64MiB")
	l.coffer("media", "vtl", "add", tapes, "CFR001L8", "--slot", "1")
	l.start()
	c := l.chrome()
	c.firstRun()
	admin := l.adminToken()

	c.open("/ui/points")
	c.clickAway(`#recent a[href$="/vm/web-1"]`)
	c.clickAway(`#points a[href*="/p/"]`)
	pointPage := c.location()
	c.waitText("#boot-verdict", "never verified")
	c.run(chromedp.Click("#verify-boot summary"), chromedp.SendKeys("#vb-marker", guestvm.BootMarker),
		chromedp.SendKeys("#vb-probes", fmt.Sprintf("http:%d/=200", guestvm.BootProbePort)))
	c.clickAway("#verify-boot-start")
	if loc := c.location(); !strings.Contains(loc, "/ui/tasks/") {
		t.Fatalf("verify boot opened %s, not its task", loc)
	}
	c.waitText("#task-status", "success")
	c.finalDetails()
	c.waitText("main", "verify-boot")

	c.open(strings.TrimPrefix(pointPage, l.srv.url))
	c.waitText("#boot-verdict", "boots")
	c.clickAway("#boot-result")
	c.waitText("#boot-summary", "every step passed")
	doc := checkBootPage(c, l, admin, pointPage[strings.LastIndex(pointPage, "/")+1:])
	c.shot("boot-verification")
	c.open("/ui/points/default/boot")
	c.waitText("#boots", doc.PointID[:8])
	c.waitText("#boots", "boots")

	// Copies of the point: to the other repository, then to tape.
	c.open(strings.TrimPrefix(pointPage, l.srv.url))
	c.run(chromedp.Click("#copy-point summary"), chromedp.SetValue("#copy-to", "offsite"))
	c.run(chromedp.SendKeys("#copy-pool", "weekly"), chromedp.SendKeys("#copy-ret", "7"))
	c.shot("point-copy")
	c.clickAway("#copy-start")
	c.waitText("#task-status", "success")
	var copied []api.BackupPoint
	if code := l.get(admin, "/api/v1/repositories/offsite/points", &copied); code != 200 || len(copied) != 1 || copied[0].ID != doc.PointID {
		t.Fatalf("the offsite repository's points after the console's copy: %d %+v", code, copied)
	}
	c.open(strings.TrimPrefix(pointPage, l.srv.url))
	c.run(chromedp.Click("#copy-point summary"), chromedp.SendKeys("#copy-pool", "weekly"), chromedp.SendKeys("#copy-ret", "7"))
	c.clickAway("#copy-media-start")
	c.waitText("#task-status", "success")
	var contents []api.MediaSegment
	if code := l.get(admin, "/api/v1/media/contents?point="+doc.PointID, &contents); code != 200 || len(contents) == 0 {
		t.Fatalf("the media catalogue after the console's copy to tape: %d %+v", code, contents)
	}
}

// startBootGuest starts web-1, a QEMU guest that boots to a login prompt
// with a guest agent and an HTTP service, on a 16 MiB disk.
func startBootGuest(ctx context.Context, t *testing.T, l *lab) *guestvm.VM {
	t.Helper()
	testutil.RequireBinary(t, "qemu-system-x86_64")
	img, err := guestvm.Build(ctx)
	if err != nil {
		if err == guestvm.ErrNoAssets && !testutil.Strict() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	disk := filepath.Join(l.dir, "vda.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", disk, "16M").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	vm, err := guestvm.Start(ctx, img, guestvm.Options{Name: "web-1", Dir: filepath.Join(l.dir, "vm"), Mode: "boot", GuestAgent: true,
		Disks: []guestvm.Disk{{ID: "vda", Path: disk, Format: "qcow2"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	if _, err := vm.WaitConsole(ctx, guestvm.BootMarker); err != nil {
		t.Fatalf("%v\n%s", err, vm.Console())
	}
	return vm
}

// checkBootPage: the result page shows each step of the ladder the API
// keeps, with its evidence, the screen as an image and the console's
// tail; it returns the API's document.
func checkBootPage(c *chrome, l *lab, admin, point string) api.BootVerification {
	c.t.Helper()
	var doc api.BootVerification
	if code := l.get(admin, "/api/v1/repositories/default/points/"+point+"/boot-verification", &doc); code != 200 || !doc.Passed || len(doc.Steps) != 6 {
		c.t.Fatalf("the API's boot verification: %d %+v", code, doc)
	}
	for _, st := range doc.Steps {
		row := c.text(fmt.Sprintf("#step-%d", st.Number))
		if !strings.Contains(row, st.Name) || !strings.Contains(row, st.Status) {
			c.t.Errorf("the ladder's step %d: %q, the API says %s %s", st.Number, row, st.Name, st.Status)
		}
		for k, v := range st.Evidence {
			if !strings.Contains(row, k) || !strings.Contains(row, strings.TrimSpace(v)) {
				c.t.Errorf("the ladder's step %d shows no evidence %s=%q: %q", st.Number, k, v, row)
			}
		}
	}
	var width int
	c.run(chromedp.Poll(`(() => { const i = document.querySelector("#boot-screenshot"); return i && i.complete ? i.naturalWidth : 0; })()`, &width,
		chromedp.WithPollingTimeout(30*time.Second)))
	if width < 100 {
		c.t.Errorf("the screenshot shown is %d pixels wide", width)
	}
	c.waitText("#boot-console", guestvm.BootMarker)
	return doc
}
