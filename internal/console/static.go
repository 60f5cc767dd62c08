package console

import (
	"embed"
	"io/fs"
	"net/http"

	"github.com/coffer-backup/coffer/internal/console/webfiles"
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

// staticHandler serves the static files (package webfiles).
func staticHandler() http.Handler {
	sub, err := fs.Sub(staticFiles, "static")
	if err != nil {
		panic(err)
	}
	return webfiles.Handler(sub, securityHeaders)
}
