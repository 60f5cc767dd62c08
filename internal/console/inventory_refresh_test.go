package console_test

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsoleInventoryRefresh: "List now" on the Inventory page lists a
// connection's VMs into the inventory (refresh-inventory) and says how
// many it listed; the page then shows them, and when they were listed.
func TestConsoleInventoryRefresh(t *testing.T) {
	l := newLab(t)
	l.config(`
connections:
  - {name: sim, kind: fake, options: {vms: 3}}
`)
	l.coffer("init")
	l.start()
	c := l.chrome()
	c.firstRun()

	c.open("/ui/inventory")
	c.run(chromedp.Click("#refresh-sim"))
	c.waitText("#refresh-result", "sim: 3 VMs listed now.")
	c.shot("inventory-refresh")
	c.open("/ui/inventory")
	c.waitText("#inventory-count", "3 of 3")
	c.waitText("#inventory-ages", "sim: listed")
	c.waitText("#vms", "db-0001")
}
