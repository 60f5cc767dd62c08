package console_test

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsoleConnections: the Connections page lists the file's
// connections and the API's, each with its source. A connection added in
// the console is stored through the API; the same name again is refused
// as existing, a name the file defines is refused as the file's, and an
// option its kind does not know is refused with the API's reason, each
// under the form, whose text stays as typed. The connection is changed
// in place at the version read, then deleted.
func TestConsoleConnections(t *testing.T) {
	l := newLab(t)
	l.config(`
connections:
  - {name: lab, kind: fake, options: {vms: 2}}
`)
	l.coffer("init")
	l.start()
	c := l.chrome()
	c.firstRun()

	c.open("/ui/connections")
	c.waitText("#connection-file-lab", "kind: fake")
	if n := c.count("#edit-connection-lab"); n != 0 {
		t.Fatal("the page offers to change the file's connection")
	}

	// Added, then refused: the same name, the file's name, a bad option.
	add := func(spec string) {
		c.run(chromedp.SetValue("#connection-spec", spec), chromedp.Click("#save-connection"))
	}
	c.run(chromedp.Click("#connection-form summary"))
	add("name: sim\nkind: fake\noptions: {vms: 3}\n")
	c.waitText("#connection-result", "The connection sim is added")
	add("name: sim\nkind: fake\noptions: {vms: 5}\n")
	c.waitText("#connection-result", "connection sim exists already")
	add("name: lab\nkind: fake\n")
	c.waitText("#connection-result", "connection lab is defined in the configuration file")
	bad := "name: typo\nkind: fake\noptions: {vmz: 3}\n"
	add(bad)
	c.waitText("#connection-result", "vmz")
	var kept string
	c.run(chromedp.Value("#connection-spec", &kept))
	if kept != bad {
		t.Fatalf("the form's text after a refusal is %q, want %q as typed", kept, bad)
	}
	token := l.adminToken()
	var conn struct {
		Source  string         `json:"source"`
		Version int64          `json:"version"`
		Spec    map[string]any `json:"spec"`
	}
	if code := l.get(token, "/api/v1/connections/sim", &conn); code != 200 || conn.Source != "catalog" || fmt.Sprint(conn.Spec["options"]) != "map[vms:3]" {
		t.Fatalf("the stored connection (%d): %+v", code, conn)
	}
	if code := l.get(token, "/api/v1/connections/typo", nil); code != 404 {
		t.Fatalf("the refused connection is stored: %d", code)
	}
	c.open("/ui/connections")
	c.waitText("#connection-catalog-sim", "vms: 3")
	c.shot("connections")

	// Changed in place, at the version the form was read at.
	read := conn.Version
	c.follow("#edit-connection-sim")
	c.waitText("#connection-form summary", "Change connection sim")
	c.run(chromedp.SetValue("#connection-spec", "kind: fake\noptions: {vms: 4}\n"), chromedp.Click("#save-connection"))
	c.waitText("#connection-result", "The connection sim is changed")
	conn.Spec = nil
	if code := l.get(token, "/api/v1/connections/sim", &conn); code != 200 || conn.Version <= read || fmt.Sprint(conn.Spec["options"]) != "map[vms:4]" {
		t.Fatalf("the changed connection (%d): %+v", code, conn)
	}
	c.open("/ui/connections")
	c.waitText("#connection-catalog-sim", "vms: 4")
	c.run(chromedp.Click("#delete-connection-sim"))
	c.waitText("#connection-changes", "The connection sim is deleted")
	if code := l.get(token, "/api/v1/connections/sim", nil); code != 404 {
		t.Fatalf("the connection after its delete: %d", code)
	}
}
