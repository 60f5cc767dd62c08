// Package webfiles serves the console's static files, compressed once
// for the browsers that take gzip. It is the console's, apart because it
// knows nothing of pages: the files and the headers come from the console.
package webfiles

import (
	"bytes"
	"compress/gzip"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Handler serves files: the console's static ones. They are named by what they
// are, not by their content, so browsers check them again (ETag-less
// no-cache would cost a round trip; an hour is short enough for an
// upgrade). A browser that takes gzip gets them compressed: a first visit
// loads all of them, 142 KiB as they are and about a fifth of that
// compressed.
// headers sets the headers every answer of the console carries.
func Handler(sub fs.FS, headers func(http.Header)) http.Handler {
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headers(w.Header())
		if strings.HasSuffix(r.URL.Path, "/") || r.URL.Path == "" {
			http.NotFound(w, r) // no directory listings
			return
		}
		w.Header().Set("Cache-Control", "private, max-age=3600")
		w.Header().Set("Vary", "Accept-Encoding")
		if acceptsGzip(r) {
			if gz, ok := compressed(sub, r.URL.Path); ok {
				w.Header().Set("Content-Encoding", "gzip")
				// ServeContent takes the type from the name, not from the
				// compressed bytes.
				http.ServeContent(w, r, r.URL.Path, time.Time{}, bytes.NewReader(gz))
				return
			}
		}
		files.ServeHTTP(w, r)
	})
}

func acceptsGzip(r *http.Request) bool {
	for _, enc := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, q, _ := strings.Cut(strings.TrimSpace(enc), ";")
		if strings.EqualFold(name, "gzip") && strings.ReplaceAll(q, " ", "") != "q=0" {
			return true
		}
	}
	return false
}

// gzipCache holds each static file compressed once (path -> []byte).
var gzipCache sync.Map

// compressed is a static file gzipped, compressing it on first use;
// false when there is no such file.
func compressed(files fs.FS, name string) ([]byte, bool) {
	if gz, ok := gzipCache.Load(name); ok {
		return gz.([]byte), true
	}
	raw, err := fs.ReadFile(files, strings.TrimPrefix(name, "/"))
	if err != nil {
		return nil, false
	}
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression) // a valid level: no error
	_, _ = zw.Write(raw)                                   // into memory: cannot fail
	_ = zw.Close()
	gzipCache.Store(name, b.Bytes())
	return b.Bytes(), true
}
