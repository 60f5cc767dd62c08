package api

import "net/http"

// Prefix is where the server serves the API: every route's path is below
// it.
const Prefix = "/api/v1"

// Route is how an operation is called over HTTP: its method and its path
// below Prefix, with {name} parameters.
type Route struct {
	Method string `json:"method"`
	Path   string `json:"path"`
}

// Mutating reports a route that changes something (every call of one is
// recorded in the audit log).
func (r Route) Mutating() bool { return r.Method != http.MethodGet }

// RouteOf is the route of the operation whose ID is id; false when the
// API has no such operation.
//
// Routes (routes_gen.go) is generated from internal/service's operation
// table, so that a client of the API (the remote command line, the web
// console) can call operations by their IDs without importing the
// service; internal/server's TestRoutesAreGenerated fails when it drifts.
func RouteOf(id string) (Route, bool) {
	r, ok := Routes[id]
	return r, ok
}
