package console

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// static holds the console's own script and style sheet (committed) and,
// in vendor/, the third-party files scripts/build-ui.sh copies from the
// npm packages pinned in web/package-lock.json (not committed).
//
//go:embed static
var staticFiles embed.FS

// vendorFiles are the third-party files the console's pages load.
var vendorFiles = []string{"vendor/htmx.min.js", "vendor/sse.min.js", "vendor/pico.min.css"}

// Built reports whether the binary holds the console's third-party files;
// without them /ui/ serves a page saying how to build the console.
func Built() bool {
	for _, f := range vendorFiles {
		if _, err := fs.Stat(staticFiles, "static/"+f); err != nil {
			return false
		}
	}
	return true
}

// staticHandler serves the static files. They are named by what they
// are, not by their content, so browsers check them again (ETag-less
// no-cache would cost a round trip; an hour is short enough for an
// upgrade).
func staticHandler() http.Handler {
	sub, err := fs.Sub(staticFiles, "static")
	if err != nil {
		panic(err)
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w.Header())
		if strings.HasSuffix(r.URL.Path, "/") || r.URL.Path == "" {
			http.NotFound(w, r) // no directory listings
			return
		}
		w.Header().Set("Cache-Control", "private, max-age=3600")
		files.ServeHTTP(w, r)
	})
}
