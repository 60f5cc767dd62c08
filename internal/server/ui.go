package server

import (
	"embed"
	"net/http"
)

// The console lives under /ui/: today a placeholder page, and the page of
// the one-time setup links (/ui/setup#coffersetup_...).
//
//go:embed ui/*.html
var uiFiles embed.FS

func (s *Server) ui() {
	page := func(name string) http.HandlerFunc {
		b, err := uiFiles.ReadFile("ui/" + name)
		if err != nil {
			panic(err) // embedded at build time
		}
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			// The pages run their own script only, and no other site
			// may frame them.
			w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; frame-ancestors 'none'")
			w.Header().Set("Referrer-Policy", "no-referrer")
			_, _ = w.Write(b)
		}
	}
	s.mux.HandleFunc("GET /ui/{$}", page("index.html"))
	s.mux.HandleFunc("GET /ui/setup", page("setup.html"))
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusFound) })
}
