package console_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/coffer-backup/coffer/internal/api"
)

// TestConsoleBackupVM: "Back up now" beside a VM of the Inventory page
// opens a form that backs it up alone (backup-vm, as `coffer backup vm`)
// in the mode chosen; the browser follows the task to its success, and
// the repository then holds a full point of that VM and of no other.
func TestConsoleBackupVM(t *testing.T) {
	l := newLab(t)
	l.config(`
connections:
  - {name: sim, kind: fake, options: {vms: 2}}
`)
	l.coffer("init")
	l.start()
	c := l.chrome()
	c.firstRun()

	c.open("/ui/inventory")
	c.run(chromedp.Click("#refresh-sim"))
	c.waitText("#refresh-result", "sim: 2 VMs listed now.")
	c.open("/ui/inventory")
	c.waitText("#vms", "db-0001")
	c.clickAway("#backup-sim-db-0001")
	c.waitText("#backup-form", "Back up db-0001 now")
	c.run(chromedp.SetValue("#b-mode", "full"))
	c.shot("backup-vm")
	c.clickAway("#backup-start")
	if loc := c.location(); !strings.Contains(loc, "/ui/tasks/") {
		t.Fatalf("the backup opened %s, not its task", loc)
	}
	c.waitText("#task-status", "success")
	c.finalDetails()
	c.waitText("main", "backup")

	var points []api.BackupPoint
	if code := l.get(l.adminToken(), "/api/v1/repositories/default/points", &points); code != 200 || len(points) != 1 ||
		points[0].VM != "db-0001" || points[0].Mode != "full" {
		t.Fatalf("the repository's points after the console backed up db-0001: %d %+v", code, points)
	}
}
