package console_test

import (
	"testing"
)

// TestConsoleConnections: the Connections page lists the file's
// connections and the API's, each with its source, and goes through the
// shared editor (configTrip): a connection added is stored through the
// API; the same name again is refused as existing, a name the file
// defines as the file's, and an option its kind does not know with the
// API's reason; it is changed at the version read, then deleted.
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
	c.trip(configTrip{Kind: "connection", Page: "/ui/connections", API: "/api/v1/connections/",
		Name: "sim", Spec: "name: sim\nkind: fake\noptions: {vms: 3}\n", Stored: [2]string{"options", "map[vms:3]"},
		Refused: []refusal{
			exists("connection", "sim", "name: sim\nkind: fake\noptions: {vms: 5}\n"),
			{Spec: "name: lab\nkind: fake\n", Says: "connection lab is defined in the configuration file"},
			{Spec: "name: typo\nkind: fake\noptions: {vmz: 3}\n", Says: "vmz", Refused: "typo"},
		},
		Added:  func() { c.shot("connections") },
		Change: "kind: fake\noptions: {vms: 4}\n", Changed: [2]string{"options", "map[vms:4]"}})
}
