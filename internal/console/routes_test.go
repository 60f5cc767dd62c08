package console

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
)

// TestEveryRouteNamesItsOperations: every page and action of the console
// names the operations of the API it calls, and only operations the API
// defines (api.Routes, generated from the service's table); so the
// console can do nothing the API cannot, and a route added without its
// operation fails here.
func TestEveryRouteNamesItsOperations(t *testing.T) {
	seen := map[string]bool{}
	for _, rt := range New(Config{}).routes() {
		if seen[rt.Pattern] {
			t.Errorf("route %s is listed twice", rt.Pattern)
		}
		seen[rt.Pattern] = true
		if !strings.HasPrefix(rt.Pattern, "GET /ui/") && !strings.HasPrefix(rt.Pattern, "POST /ui/") {
			t.Errorf("route %s is not under /ui/", rt.Pattern)
		}
		if len(rt.Ops) == 0 {
			t.Errorf("route %s names no operation: every console action calls one of the API", rt.Pattern)
		}
		for _, id := range rt.Ops {
			if _, ok := api.RouteOf(id); !ok {
				t.Errorf("route %s names %s, which the operation table does not define", rt.Pattern, id)
			}
		}
		// An action may read first (the stored object it changes), but it
		// calls at least one operation that acts.
		if strings.HasPrefix(rt.Pattern, "POST ") && !slices.ContainsFunc(rt.Ops, func(id string) bool {
			r, ok := api.RouteOf(id)
			return ok && r.Mutating()
		}) {
			t.Errorf("the action %s calls only operations that change nothing (%v): an action calls what it does", rt.Pattern, rt.Ops)
		}
	}
}

// TestUndeclaredOperationIsRefused: a page that calls an operation its
// route does not name gets an error, and the API is never asked.
func TestUndeclaredOperationIsRefused(t *testing.T) {
	asked := false
	api := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { asked = true })
	c := newCaller(api, httptest.NewRequest("GET", "/ui/tasks", nil), []string{"list-jobs"})
	if _, err := c.call("delete-user", map[string]string{"user": "admin"}, nil, nil, nil); err == nil || asked {
		t.Fatalf("an undeclared operation: err %v, API asked %v", err, asked)
	}
	if _, err := c.call("list-jobs", nil, nil, nil, nil); err != nil || !asked {
		t.Fatalf("a declared operation: err %v, API asked %v", err, asked)
	}
}

// TestPlaceholderWithoutFrontEnd: a console built without its
// third-party files answers every page with how to build it, the setup
// page excepted (a first run must work with any build).
func TestPlaceholderWithoutFrontEnd(t *testing.T) {
	c := New(Config{})
	c.built = false
	mux := http.NewServeMux()
	c.Mount(mux)
	for path, want := range map[string]string{"/ui/": "scripts/build-ui.sh", "/ui/tasks": "scripts/build-ui.sh", "/ui/setup": "Choose your password"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("%s without the front-end files: %d, no %q", path, rec.Code, want)
		}
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Errorf("%s: Content-Security-Policy %q", path, csp)
		}
	}
}

// TestRepairPartsAreTheOperations: the repair page offers exactly the
// parts the repair operation takes.
func TestRepairPartsAreTheOperations(t *testing.T) {
	f, _ := reflect.TypeOf(api.RepairInput{}).FieldByName("What")
	want := strings.Split(f.Tag.Get("enum"), ",")
	if !slices.Equal(repairParts, want) {
		t.Errorf("the console offers repairs of %v, the operation takes %v", repairParts, want)
	}
}
