// Package actions holds pages and actions of the web console (package
// console) that call the API through the console's page: what a person
// starts by hand on a repository (its keys, repair, catalog exports,
// undelete), a point's copies, a media library's labelling and catalogue,
// an instant recovery served again, a VM backed up alone, a replication
// run, the failover plans and their runs. It lives apart from package
// console to keep each package small enough to hold in one's head
// (cmd/coffer's layout test).
//
// Each route names the operations it calls, as the console's own do; the
// console serves them with its guard, templates and API caller, and its
// tests hold them to the API's operation table.
package actions

import (
	"net/http"
	"net/url"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/console/apicall"
)

// Page is one request to the console as these handlers see it; package
// console implements it over its own page.
type Page interface {
	// Call runs an operation of the route's through the API, as the
	// browser; out receives its answer.
	Call(op string, params map[string]string, query url.Values, body, out any) error
	// StartTask runs a long operation so that it goes on after the
	// request, and returns its task's ID once recorded (0: it ended with
	// no task, its answer in out).
	StartTask(op string, params map[string]string, query url.Values, body, out any) (int64, error)
	// Form is the posted form; Value a parameter of the route's path.
	Form() url.Values
	Value(name string) string
	// HTMX reports a request htmx sent for a fragment.
	HTMX() bool
	// Repositories are the repository names of the configuration.
	Repositories() []string
	// Show renders a whole page; Fragment a part of one
	// ("page/fragment") for htmx.
	Show(template, title, nav string, data any)
	Fragment(template string, data any)
	// Done answers an action that succeeded; Started one that started a
	// task (the browser follows its page); Fail one that did not work.
	Done(message, back string)
	Started(id int64, err error, done string)
	Fail(err error)
}

// Route is a page or an action: its pattern on the server's mux, the
// operations it may call, and its handler.
type Route struct {
	Pattern string
	Ops     []string
	Handle  func(Page)
}

// Routes are this package's pages and actions.
func Routes() []Route {
	return []Route{
		// A point's copies.
		{"POST /ui/points/{repo}/p/{point}/copy", []string{"copy"}, copyPoint},
		{"POST /ui/points/{repo}/p/{point}/copy-to-media", []string{"media-copy"}, copyPointToMedia},

		// A repository's keys, repair and catalog.
		{"POST /ui/repositories/{repo}/keys", []string{"add-key"}, addKey},
		{"POST /ui/repositories/{repo}/keys/{key}/remove", []string{"remove-key"}, removeKey},
		{"POST /ui/repositories/{repo}/repair", []string{"repair"}, repair},
		{"POST /ui/repositories/{repo}/catalog/rebuild", []string{"rebuild-catalog"}, rebuildCatalog},
		{"POST /ui/repositories/{repo}/undelete", []string{"undelete"}, undelete},

		// Exports of the server's state in a repository.
		{"GET /ui/repositories/{repo}/catalog-exports", page("list-catalog-exports"), catalogExports},
		{"POST /ui/repositories/{repo}/catalog-exports", page("export-catalog", "list-catalog-exports"), exportCatalog},
		{"GET /ui/repositories/{repo}/catalog-exports/{export}", page("get-catalog-export"), catalogExport},

		// One VM backed up now.
		{"GET /ui/inventory/{conn}/vm/{vm}/backup", page(), backupVMForm},
		{"POST /ui/inventory/{conn}/vm/{vm}/backup", []string{"backup-vm"}, backupVM},

		// An instant recovery served again.
		{"POST /ui/restore/{session}/serve", []string{"instant-serve"}, instantServe},

		// Replications run by hand.
		{"GET /ui/replications/run", page("list-replications", "list-replicas"), replications},
		{"POST /ui/replications/{name}/run", []string{"run-replication"}, runReplication},

		// Failover plans: their runs, and their operations for a caller
		// who holds Sys.Failover.
		{"GET /ui/failover", page("list-failover-plans", "failover-plan-runs"), failoverPlans},
		{"POST /ui/failover/{name}/test", []string{"test-failover"}, startFailover("test")},
		{"POST /ui/failover/{name}/failover", []string{"failover"}, startFailover("failover")},
		{"POST /ui/failover/{name}/planned", []string{"planned-failover"}, startFailover("planned")},
		{"POST /ui/failover/{name}/failback", []string{"failback"}, startFailover("failback")},

		// The server's pipeline measured for the planner.
		{"POST /ui/system/bench/pipeline", []string{"start-bench-pipeline"}, measurePipeline},

		// A media library's cartridges by hand.
		{"POST /ui/media/libraries/{library}/label", []string{"media-label"}, mediaLabel},
		{"POST /ui/media/libraries/{library}/catalog", []string{"rebuild-media-catalog"}, mediaCatalog},
	}
}

// page are the operations of a whole page, which names the caller in
// its header (whoami).
func page(ids ...string) []string { return append(ids, "whoami") }

// refuse fails with a message about the request's own input.
func refuse(p Page, msg string) {
	p.Fail(&apicall.Error{Status: http.StatusBadRequest, Class: api.Invalid, Detail: msg})
}
