package console_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
)

// TestConsoleMeasurePipeline: the plan page's "Measure the server's
// pipeline" starts the measurement as a task (start-bench-pipeline),
// which answers at once: the browser follows the task's page while it
// runs, and a cancel ends it.
func TestConsoleMeasurePipeline(t *testing.T) {
	l := newLab(t)
	l.config(`
connections:
  - {name: sim, kind: fake, options: {vms: 2}}
policies:
  - {name: nightly, connection: sim}
`)
	l.coffer("init")
	l.start()
	c := l.chrome()
	c.firstRun()

	c.open("/ui/policies/nightly/plan")
	c.waitText("#measure-pipeline", "Measure the server's pipeline")
	c.clickAway("#measure-pipeline button")
	loc := c.location()
	_, idText, found := strings.Cut(loc, "/ui/tasks/")
	id, err := strconv.ParseInt(strings.TrimRight(idText, "/"), 10, 64)
	if !found || err != nil {
		t.Fatalf("the measurement opened %s, not its task", loc)
	}
	var j api.Job
	if code := l.get(l.adminToken(), "/api/v1/jobs/"+idText, &j); code != 200 || j.ID != id || j.Kind != "bench-pipeline" {
		t.Fatalf("task %d: HTTP %d %+v, want the measurement", id, code, j)
	}
	c.waitText("main", "bench-pipeline")
	l.coffer("job", "cancel", idText)
	c.waitText("#task-status", "cancelled")
}
