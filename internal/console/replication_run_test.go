package console_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestConsoleRunReplication: the replications page, linked from the
// Restore page, lists a configured replication with what it replicates
// where; Run now runs it as a task the browser follows to its success,
// and the standby it made then holds the VM's point (qemu-img compare
// against a restore of it), as `coffer replicas` lists it. A replication
// added on the Settings page is listed there too.
func TestConsoleRunReplication(t *testing.T) {
	testutil.RequireBinary(t, "qemu-img")
	testutil.RequireBinary(t, "qemu-nbd")
	l := newLab(t)
	standbys := filepath.Join(l.dir, "dr")
	l.config(`connections:
  - {name: dr, kind: qemu, options: {sockets: ["` + l.dir + `/none/*.qmp"]}}
replications:
  - {name: web-dr, vms: [web], connection: dr, directory: ` + standbys + `, keep: 2}
`)
	img := l.ext4Image("web", map[string][]byte{"srv/index.html": []byte("standby\n")})
	l.coffer("init")
	l.coffer("backup", "disk", img, "--name", "web")
	l.start()
	c := l.chrome()
	c.firstRun()

	c.open("/ui/restore")
	c.clickAway("#replications-link")
	c.waitText("#replication-web-dr", "on dr, in "+standbys)
	if facts := c.text("#replication-web-dr"); !strings.Contains(facts, "web of the repository (the default)") || !strings.Contains(facts, "by hand only") {
		t.Fatalf("the replication's facts: %q", facts)
	}
	c.shot("replications")
	c.clickAway("#run-web-dr")
	if loc := c.location(); !strings.Contains(loc, "/ui/tasks/") {
		t.Fatalf("the run opened %s, not its task", loc)
	}
	c.waitText("#task-status", "success")

	var rs []api.Replica
	if err := json.Unmarshal([]byte(l.coffer("replicas", "--json")), &rs); err != nil || len(rs) != 1 || rs[0].VM != "web" || len(rs[0].Points) != 1 {
		t.Fatalf("the replicas after the console's run: %+v %v", rs, err)
	}
	// The page lists the standby the run made, as `coffer replicas` does.
	c.open("/ui/replications/run")
	row := c.text("#standby-web-dr-web")
	if cells := strings.Split(row, "\t"); len(cells) != 5 || cells[0] != "web" || cells[2] != "1" || !strings.Contains(cells[4], "within") {
		t.Fatalf("the standby's row: %q", row)
	}
	c.shot("replicas")
	restored := filepath.Join(l.dir, "restored.raw")
	l.coffer("restore", "latest", "--to", restored)
	top := filepath.Join(standbys, "web", "disk-0-000001.qcow2")
	if _, err := os.Stat(top); err != nil {
		t.Fatalf("the standby's first point: %v", err)
	}
	if out, err := exec.Command("qemu-img", "compare", "-f", "qcow2", "-F", "raw", top, restored).CombinedOutput(); err != nil {
		t.Fatalf("the standby differs from the point: %v %s", err, out)
	}

	// A replication added on the Settings page is stored through the API
	// and listed with its Run now.
	c.open("/ui/settings")
	c.run(chromedp.Click("#replication-form summary"),
		chromedp.SetValue("#replication-spec", "name: db-dr\nvms: [db]\nconnection: dr\ndirectory: "+standbys+"\n"), chromedp.Click("#save-replication"))
	c.waitText("#replication-result", "The replication db-dr is added")
	var objs []api.ConfigObject
	if code := l.get(l.adminToken(), "/api/v1/replications", &objs); code != 200 || len(objs) != 2 {
		t.Fatalf("the API's replications after the console added one: %d %+v", code, objs)
	}
	c.open("/ui/replications/run")
	c.waitText("#replication-db-dr", "Run db-dr now")
}
