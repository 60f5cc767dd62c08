package console_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsoleEngineSettings: the Settings page says what is in effect
// (the file, the catalog's last change, no problem), and lists the limits,
// latency-control entries, resource groups and storage snapshot
// providers of the file and of the API, each with its source; the
// catalog's limits say which of their keys the file sets instead. A
// resource group added in the console is stored through the API, and a
// latency-control entry that can measure nothing is refused with the
// API's reason. The limits are changed in place at the version read,
// and the group is deleted again.
func TestConsoleEngineSettings(t *testing.T) {
	l := newLab(t)
	l.config(`
limits: {tasks: 12}
latency-control:
  - {datastores: [/srv/vms], threshold: 20ms}
`)
	l.coffer("init")
	limits := filepath.Join(l.dir, "limits.yaml")
	if err := os.WriteFile(limits, []byte("tasks: 4\nper-host: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l.coffer("config", "create", "limits", "-f", limits)
	l.start()
	c := l.chrome()
	c.firstRun()

	c.open("/ui/settings")
	c.waitText("#effective", "The configuration file "+l.vars["COFFER_CONFIG"])
	c.waitText("#no-config-problems", "No problem found.")
	c.waitText("#limits-file-default", "tasks: 12")
	c.waitText("#limits-catalog-default", "per-host: 3")
	c.waitText("#limits-catalog-default", "tasks: the configuration file sets it too")
	c.waitText("#latency-control-objects", "#1")
	if n := c.count("#limits-form"); n != 0 {
		t.Fatal("the page offers to add limits where they exist (there is one limits object)")
	}

	// A resource group added here; an entry that measures nothing refused.
	c.run(chromedp.Click("#resource-group-form summary"),
		chromedp.SetValue("#resource-group-spec", "name: array-a\ndatastores: [/srv/ssd-*]\nlimit: 2\n"), chromedp.Click("#save-resource-group"))
	c.waitText("#resource-group-result", "The resource-group array-a is added")
	c.run(chromedp.Click("#latency-control-form summary"),
		chromedp.SetValue("#latency-control-spec", "name: san\ndatastores: [san-*]\n"), chromedp.Click("#save-latency-control"))
	c.waitText("#latency-control-result", "latency-control san: it can measure nothing")
	token := l.adminToken()
	var g struct {
		Source string         `json:"source"`
		Spec   map[string]any `json:"spec"`
	}
	if code := l.get(token, "/api/v1/resource-groups/array-a", &g); code != 200 || g.Source != "catalog" || fmt.Sprint(g.Spec["limit"]) != "2" {
		t.Fatalf("the stored group (%d): %+v", code, g)
	}
	c.open("/ui/settings")
	c.waitText("#resource-group-catalog-array-a", "limit: 2")
	// What is in effect: the catalog's change that added the group.
	var eff struct {
		Generation int64 `json:"generation"`
	}
	if code := l.get(token, "/api/v1/config/effective", &eff); code != 200 || eff.Generation < 2 {
		t.Fatalf("the configuration in effect (%d): %+v", code, eff)
	}
	c.waitText("#effective", fmt.Sprintf("as of its change %d:", eff.Generation))
	c.shot("settings")

	// The limits changed in place, at the version the form was read at.
	var lim struct {
		Version int64          `json:"version"`
		Spec    map[string]any `json:"spec"`
	}
	if code := l.get(token, "/api/v1/limits/default", &lim); code != 200 {
		t.Fatalf("the limits: %d", code)
	}
	read := lim.Version
	c.follow("#edit-limits-default")
	c.waitText("#limits-form summary", "Change limits default")
	c.run(chromedp.SetValue("#limits-spec", "per-host: 2\n"), chromedp.Click("#save-limits"))
	c.waitText("#limits-result", "The limits default is changed")
	lim.Spec = nil
	if code := l.get(token, "/api/v1/limits/default", &lim); code != 200 || lim.Version <= read || fmt.Sprint(lim.Spec) != "map[per-host:2]" {
		t.Fatalf("the changed limits (%d): %+v", code, lim)
	}
	c.open("/ui/settings")
	c.run(chromedp.Click("#delete-resource-group-array-a"))
	c.waitText("#resource-group-changes", "The resource-group array-a is deleted")
	if code := l.get(token, "/api/v1/resource-groups/array-a", nil); code != 404 {
		t.Fatalf("the group after its delete: %d", code)
	}
}
