package server

import (
	"context"

	"github.com/coffer-backup/coffer/internal/auth"
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
	console.New(console.Config{API: s.mux, Repositories: repos, Logger: s.log, Realms: s.realms}).Mount(s.mux)
}

// realms are the sign-in realms the console's sign-in page offers.
func (s *Server) realms() []console.Realm {
	var out []console.Realm
	for _, r := range s.cfg.Access.Realms() {
		label := r.Comment
		if label == "" {
			label = "Sign in with " + r.Name
		}
		out = append(out, console.Realm{Name: r.Name, OIDC: r.Type == auth.RealmOIDC, Label: label, Default: r.Default})
	}
	return out
}
