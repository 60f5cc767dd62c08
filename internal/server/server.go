// Package server is coffer's REST API server: huma v2 on net/http's
// ServeMux, serving /api/v1 (every operation of internal/service's table,
// registered from it), its OpenAPI document, /healthz, /readyz and the
// console under /ui/. One middleware authenticates each request
// (internal/auth: API tokens, session cookies), checks the operation's
// privileges on its objects before the endpoint runs, and records every
// mutating call in the audit log; errors become problem+json answers by
// their class in one table (problem.go). Run (run.go) starts the server's
// components and drains them on SIGTERM.
package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/operations"
)

// Prefix is where the API lives (api.Prefix, where its clients read it).
const Prefix = api.Prefix

// Config is what the HTTP server needs.
type Config struct {
	// Service runs the operations (its default repository is the
	// repository setting; a request's {repo} picks another).
	Service *service.Service
	// Access authenticates requests and records the audit log.
	Access *auth.Service
	Logger *slog.Logger
	// Metrics serves /metrics (Prometheus' text format); nil: not served.
	// Scrapers authenticate like every API client, with a token holding
	// Sys.Audit on /system: the series name VMs, policies and
	// repositories, which not every user of the API may see.
	Metrics http.Handler
}

// documentVersion is the API's version in its OpenAPI document: the
// version of the API under /api/v1, not coffer's (the document is
// committed, and reviewed when it changes).
const documentVersion = "1"

// Server is the HTTP handler of coffer's server.
type Server struct {
	cfg Config
	log *slog.Logger
	mux *http.ServeMux
	api huma.API
}

// New builds the server's handler: every operation of the service's table
// registered under /api/v1, and the other endpoints beside it.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux()}
	s.api = humago.NewWithPrefix(s.mux, Prefix, apiConfig(documentVersion))
	for i := range operations.All {
		if operations.All[i].Internal == "" { // run by coffer's processes only: no route
			s.register(&operations.All[i])
		}
	}
	// Whatever matches nothing is a problem too.
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, api.Errorf(api.NotFound, "no operation %s %s: the API is described at %s/openapi.json",
			r.Method, r.URL.Path, Prefix))
	})
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
	if cfg.Metrics != nil {
		s.mux.Handle("GET /metrics", s.requireAudit(cfg.Metrics))
	}
	s.oidcRoutes()
	s.ui()
	return s
}

// Mux is the server's mux, for components that add endpoints of their own
// (/metrics).
func (s *Server) Mux() *http.ServeMux { return s.mux }

// Handler is the whole server: the mux behind cross-origin protection (a
// browser's cross-site request that changes state is refused: the
// session cookie alone cannot make one), panics turned into problems, and
// one log line per request.
func (s *Server) Handler() http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, api.Errorf(api.Denied, "cross-origin request refused: the console calls the API from its own origin"))
	}))
	return s.logRequests(s.recoverPanics(cop.Handler(s.mux)))
}

// requireAudit serves h to subjects with Sys.Audit on /system only, and
// answers everyone else with a problem.
func (s *Server) requireAudit(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		subject, err := s.cfg.Access.AuthenticateRequest(r.Context(), r)
		if err != nil {
			writeProblem(w, err)
			return
		}
		if !auth.Allowed(subject, auth.SystemPath, auth.SysAudit) {
			writeProblem(w, api.Errorf(api.Denied, "%s lacks %s on %s to read the metrics", subject, auth.SysAudit, auth.SystemPath))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// apiConfig is huma's configuration: OpenAPI 3.1 at /api/v1/openapi.json,
// no docs page (huma's loads its renderer from a CDN), plain documents
// (no $schema links added to them), strict query parameters, and the two
// ways to authenticate.
func apiConfig(version string) huma.Config {
	c := huma.DefaultConfig("coffer", version)
	c.CreateHooks = nil
	c.DocsPath = ""
	c.SchemasPath = ""
	c.RejectUnknownQueryParameters = true
	c.Info.Description = "coffer's REST API: every operation of the command line, with the same documents. " +
		"Authenticate with an API token (Authorization: Bearer coffer_...) or a session cookie from /access/login."
	c.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"token":   {Type: "http", Scheme: "bearer", Description: "an API token: coffer_<id>_<secret>"},
		"session": {Type: "apiKey", In: "cookie", Name: auth.SessionCookieName, Description: "a browser session from /access/login"},
	}
	return c
}

// OpenAPI is the API's OpenAPI 3.1 document, as the server serves it.
func OpenAPI() ([]byte, error) {
	s := New(Config{})
	b, err := json.MarshalIndent(s.api.OpenAPI(), "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// configMethods run the operations on configuration objects.
var configMethods = map[string]bool{"ConfigObjects": true, "ConfigObject": true, "CreateConfigObject": true,
	"UpdateConfigObject": true, "DeleteConfigObject": true, "EffectiveConfig": true, "PolicyPreview": true,
	"PolicyDraftPreview": true}

// tag groups an operation in the OpenAPI document by what it acts on.
func tag(op *service.Operation) string {
	switch {
	case configMethods[op.Method] && op.ID != "preview-policy":
		return "configuration"
	case strings.HasPrefix(op.Path, "/repositories/{repo}/points/"), op.Path == "/points":
		return "points"
	case strings.HasPrefix(op.Path, "/repositories"):
		return "repositories"
	case strings.HasPrefix(op.Path, "/instant"):
		return "instant recovery"
	case strings.HasPrefix(op.Path, "/access"), op.Path == "/audit":
		return "access"
	case op.ID == "plan-policy", op.ID == "plan-accuracy", op.ID == "plan-accuracies", strings.HasPrefix(op.Path, "/system/bench/"):
		return "planning"
	}
	return "jobs and policies"
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
}

// readyTimeout bounds a readiness check (an unreachable S3 endpoint).
const readyTimeout = 10 * time.Second

// readyz says whether the catalog and every configured repository answer.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := s.cfg.Service.Ready(ctx); err != nil {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(&ProblemDetails{ErrorModel: huma.ErrorModel{Status: http.StatusServiceUnavailable,
			Title: "Service Unavailable", Detail: err.Error()}, Class: service.Classify(err)})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"ready"}` + "\n"))
}
