package server

import (
	"context"

	"github.com/coffer-backup/coffer/internal/console"
)

// ui mounts the web console under /ui/ (internal/console): its pages call
// the API through this server's own mux, so every action passes the one
// guard of register.go. The one-time setup links lead to its
// /ui/setup#coffersetup_... page.
func (s *Server) ui() {
	repos := func(context.Context) []string { return nil }
	if s.cfg.Service != nil {
		repos = s.cfg.Service.RepositoryNamesInEffect
	}
	console.New(console.Config{API: s.mux, Repositories: repos, Logger: s.log}).Mount(s.mux)
}
