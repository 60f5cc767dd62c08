package main

import (
	"fmt"
	"net/url"
	"time"

	"github.com/coffer-backup/coffer/bench/catalogfill"
)

// Targets of issue 16: the dashboard usable within 1 s of navigating to
// it, every list page within 1.5 s.
const (
	dashboardTarget = time.Second
	listTarget      = 1500 * time.Millisecond
)

// consolePage is a page the benchmark opens: its row name, its path on
// the server and its target.
type consolePage struct {
	name, path string
	target     time.Duration
}

// pages are the dashboard and every console page that lists things
// (internal/console/pages.go's routes), on the shape's rows. The points
// pages name the fill's repository by its ID: the server's own
// repository (a small real one) has another, and its name would list
// that repository's two points rather than the catalog's 100,000.
func pages(s catalogfill.Shape) []consolePage {
	repo := "/ui/points/" + url.PathEscape(s.Repository)
	return []consolePage{
		{"dashboard", "/ui/", dashboardTarget},
		{"tasks", "/ui/tasks", listTarget},
		{"tasks: failed", "/ui/tasks?status=failed", listTarget},
		{"task: a policy run (its VMs' tasks and log)", fmt.Sprintf("/ui/tasks/%d", s.PolicyRun(s.PolicyRuns-1)), listTarget},
		{"points: repository", repo, listTarget},
		{"points: a VM's", repo + "/vm/" + catalogfill.VMName(1), listTarget},
		{"restore (instant sessions)", "/ui/restore", listTarget},
		{"inventory (VMs)", "/ui/inventory", listTarget},
		{"policies", "/ui/policies", listTarget},
		{"repositories", "/ui/repositories", listTarget},
		{"notifications", "/ui/notifications", listTarget},
		{"access (users, tokens, ACL)", "/ui/access", listTarget},
		{"access: audit", "/ui/access/audit", listTarget},
	}
}
