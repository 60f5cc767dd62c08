package api

import (
	"net/http"
	"regexp"
	"testing"
)

// routePath is a path below Prefix: segments, some {name} parameters.
var routePath = regexp.MustCompile(`^(/([a-z0-9-]+|\{[a-z_]+\}))+$`)

// TestRoutesAreCallable: every generated route is one a client can call
// by its ID: a method it knows, a path of plain segments and {name}
// parameters, and no two operations on the same method and path.
func TestRoutesAreCallable(t *testing.T) {
	if len(Routes) == 0 {
		t.Fatal("no routes: regenerate routes_gen.go")
	}
	methods := map[string]bool{http.MethodGet: true, http.MethodPost: true, http.MethodPut: true, http.MethodDelete: true}
	byRoute := map[Route]string{}
	for id, r := range Routes {
		if !methods[r.Method] {
			t.Errorf("%s: method %q", id, r.Method)
		}
		if !routePath.MatchString(r.Path) {
			t.Errorf("%s: path %q", id, r.Path)
		}
		if other, ok := byRoute[r]; ok {
			t.Errorf("%s and %s are both %s %s", id, other, r.Method, r.Path)
		}
		byRoute[r] = id
		if got, ok := RouteOf(id); !ok || got != r {
			t.Errorf("RouteOf(%q) = %v, %v", id, got, ok)
		}
	}
	if _, ok := RouteOf("no-such-operation"); ok {
		t.Error("RouteOf finds an operation the API does not have")
	}
	if r, _ := RouteOf("verify"); r.Mutating() != (r.Method != http.MethodGet) || !r.Mutating() {
		t.Errorf("verify is %v, mutating %v", r, r.Mutating())
	}
}
