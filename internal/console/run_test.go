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

	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestConsoleRunNowLiveAndCancel: a policy over a real QEMU guest (TCG)
// is created in the editor (checked as it is typed: a bad schedule is
// refused with the API's message, then the guest is previewed as
// selected, with the schedule's next runs) and run from its page; the task page shows the run's progress (bytes,
// rate, ETA) and its log as they happen, through server-sent events, and
// so does the dashboard; cancel stops it, and the page shows it
// cancelled without a reload. The policy's read rate is limited so that
// the run is still going when the test cancels it.
func TestConsoleRunNowLiveAndCancel(t *testing.T) {
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
	if out, err := exec.Command(qemuImg, "create", "-q", "-f", "qcow2", disk, "64M").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	vm, err := guestvm.Start(ctx, img, guestvm.Options{Name: "web-1", UUID: "0c9d2f1e-5b7a-4c3e-9f1d-2a6b8c4e0f11",
		Dir: filepath.Join(l.dir, "vm-web-1"), Mode: "write", Base: 512, Interval: 50 * time.Millisecond,
		Disks: []guestvm.Disk{{ID: "vda", Path: disk, Format: "qcow2"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	if _, err := vm.WaitConsole(ctx, "COFFER READY"); err != nil {
		t.Fatalf("%v\n%s", err, vm.Console())
	}
	l.config(fmt.Sprintf(`
connections:
  - name: kvm1
    kind: qemu
    options: {sockets: ["%s"], host: kvm1}
limits: {rate: 1MiB}
`, filepath.Join(l.dir, "vm-*", "qmp.sock")))
	l.coffer("init")
	l.start()
	c := l.chrome()
	c.firstRun()

	// The policy is made in the editor, checked as it is typed.
	c.open("/ui/policies")
	c.run(chromedp.Click("#new-policy"), chromedp.WaitVisible("#policy-form"))
	c.run(chromedp.SendKeys("#p-name", "web"), chromedp.SendKeys("#p-connection", "kvm1"),
		chromedp.SendKeys("#p-select", "web-*"), chromedp.SendKeys("#p-keep-last", "3"),
		chromedp.SendKeys("#p-schedule", "at dawn"))
	c.waitText("#draft-problem", "at dawn")
	c.shot("policy-editor-invalid")
	c.retype("#p-schedule", "0 22 * * *")
	c.run(chromedp.SendKeys("#p-rpo", "26h"))
	c.waitText("#draft-vms", "web-1")
	c.waitText("#draft-runs", "22:00")
	c.shot("policy-editor")
	c.clickAway("#save-policy")
	c.run(chromedp.WaitVisible("#run-now"))
	if loc := c.location(); !strings.HasSuffix(loc, "/ui/policies/web") {
		t.Fatalf("saving the policy led to %s", loc)
	}
	c.waitText("main", "web-1")
	// Stored through the API as typed, with its version.
	var stored struct {
		Source  string         `json:"source"`
		Version int64          `json:"version"`
		Spec    map[string]any `json:"spec"`
	}
	if code := l.get(l.adminToken(), "/api/v1/policies/web", &stored); code != 200 || stored.Source != "catalog" || stored.Version != 1 ||
		stored.Spec["schedule"] != "0 22 * * *" || stored.Spec["rpo"] != "26h" || stored.Spec["connection"] != "kvm1" {
		t.Fatalf("the stored policy (%d): %+v", code, stored)
	}
	c.run(chromedp.Click("#run-now"), chromedp.WaitVisible("#task-status"))
	taskPage := c.location()
	if !strings.Contains(taskPage, "/ui/tasks/") {
		t.Fatalf("run now opened %s, not the run's task", taskPage)
	}
	// Live: the progress with its rate and ETA, and the log, arrive
	// while the page stays as it was loaded.
	c.waitText("#task-progress", "/s")
	c.waitText("#task-progress", "ETA")
	c.waitText("#log", "web-1")
	c.shot("task-running")

	// The dashboard follows the running task too.
	c.open("/ui/")
	c.waitText("#running-h + table", "backup-policy web")
	c.waitText("#running-h + table", "/s")
	c.run(chromedp.WaitVisible("#repos article"))
	c.shot("dashboard-running")

	c.run(chromedp.Navigate(taskPage), chromedp.WaitVisible("#cancel"))
	c.run(chromedp.Click("#cancel"))
	c.waitText("#task-action", "Cancel requested")
	c.waitText("#task-status", "cancelled")
	c.run(chromedp.WaitVisible("#ended"))
	if st := c.text("#task-status"); strings.Contains(st, "running") {
		t.Fatalf("the task still shows %q", st)
	}
	c.shot("task-cancelled")
	// The log downloads whole, with the cancel in it.
	c.run(chromedp.Click("#download-log"))
	log, name := c.download()
	if !strings.HasSuffix(name, ".log") || !strings.Contains(string(log), "cancel") {
		t.Fatalf("the downloaded log %s:\n%s", name, log)
	}
}
