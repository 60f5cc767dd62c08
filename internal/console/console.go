// Package console is coffer's web console: server-rendered pages under
// /ui/ (Go html/template, htmx for the parts that change in place, its SSE
// extension for live logs and progress, Pico CSS), mounted by
// internal/server.
//
// The console is a client of the REST API, in process: every page and
// every action calls operations by their IDs (api.Routes, generated from
// internal/service's table) through the server's own /api/v1 handler,
// with the browser's session cookie, so the one guard (authentication,
// privileges, audit) decides everything and the console can do nothing
// the API cannot; it imports neither the service nor the server (a
// depguard rule in .golangci.yml). Each route declares the operation IDs
// it calls (pages.go), the call refuses any other, and a test fails when
// a route declares none or one the API lacks.
//
// Without the third-party files (scripts/build-ui.sh puts them in
// static/vendor) the console serves a page saying how to build it: `go
// build ./cmd/coffer` needs no Node.
package console

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
)

// Config is what the console needs from the server.
type Config struct {
	// API serves /api/v1 (the server's mux): the console sends it the
	// requests of its pages and actions.
	API http.Handler
	// Repositories lists the repository names a request may name.
	Repositories func(context.Context) []string
	Logger       *slog.Logger
	// Realms lists the sign-in realms besides coffer's own users.
	Realms func() []Realm
}

// Realm is a sign-in realm: an OIDC realm is a button, others a choice.
type Realm struct {
	Name, Label   string
	OIDC, Default bool
}

// Console is the console's handler set.
type Console struct {
	cfg   Config
	log   *slog.Logger
	pages *templates
	built bool
}

// New prepares the console: its templates and its static files.
func New(cfg Config) *Console {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Repositories == nil {
		cfg.Repositories = func(context.Context) []string { return nil }
	}
	return &Console{cfg: cfg, log: cfg.Logger, pages: parseTemplates(), built: Built()}
}

// Mount registers the console's routes on mux under /ui/.
func (c *Console) Mount(mux *http.ServeMux) {
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", staticHandler()))
	// Browsers ask for /favicon.ico before any page names its icon.
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		r2 := r.Clone(r.Context())
		r2.URL.Path = "favicon.svg"
		staticHandler().ServeHTTP(w, r2)
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusFound) })
	for _, rt := range c.routes() {
		mux.Handle(rt.Pattern, c.handler(rt))
	}
}

// securityHeaders are the headers of every console answer: its pages run
// the console's own files only (no inline script or style, nothing from
// another origin), and no other site may frame them.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
}

// handler wraps a route: its security headers, the operations it may
// call, the placeholder when the console is not built, and the sign-in
// page for a caller without a session.
func (c *Console) handler(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w.Header())
		if !c.built && !strings.HasPrefix(rt.Pattern, "GET /ui/setup") && rt.Pattern != "POST /ui/setup" {
			c.placeholder(w)
			return
		}
		p := &page{c: c, w: w, r: r, route: rt, api: newCaller(c.cfg.API, r, rt.Ops)}
		rt.Handle(p)
	})
}

// placeholder is the console of a binary built without its front-end
// files.
func (c *Console) placeholder(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_ = c.pages.render(w, "placeholder", nil)
}
