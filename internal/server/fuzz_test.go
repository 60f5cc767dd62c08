package server

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/service/operations"
)

// FuzzRequest sends the handler requests with random methods, paths,
// queries and bodies, authenticated as the administrator (so that
// decoding is reached behind the access check): every answer is below
// 500, and every error answer is a problem document. The seeds are every
// route of the table with a plausible body.
func FuzzRequest(f *testing.F) {
	methods := []string{"GET", "POST", "PUT", "DELETE", "PATCH"}
	for _, op := range operations.All {
		path := strings.NewReplacer("{repo}", "default", "{point}", "latest", "{id}", "1", "{user}", "admin",
			"{token}", "0123456789abcdef", "{session}", "abc", "{policy}", "nightly", "{key}", "00", "{what}", "index",
			"{connection}", "lab", "{vm}", "web-0000").Replace(op.Path)
		for i, m := range methods {
			if m == op.HTTP {
				f.Add(uint8(i), path, []byte(`{}`))
				f.Add(uint8(i), path+"?limit=-1&start=x", []byte(`{"paths": ["../../x"], "to": "..", "keep": {"keep_last": -1}}`))
			}
		}
	}
	f.Add(uint8(1), "/repositories/default/verify", []byte(`{"read_data": 1e309}`))
	f.Add(uint8(1), "/access/login", []byte("\x00\xff{"))
	f.Add(uint8(0), "/../../etc/passwd", []byte(nil))
	f.Add(uint8(0), "/repositories/%2e%2e/points", []byte(nil))

	e := newEnv(f, "")
	f.Fuzz(func(t *testing.T, method uint8, path string, body []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, methods[int(method)%len(methods)], "http://coffer"+Prefix+path, bytes.NewReader(body))
		if err != nil {
			return // not a request a client can send
		}
		req.Header.Set("Authorization", "Bearer "+e.tokens["admin"])
		req.Header.Set("Content-Type", "application/json")
		req.RemoteAddr = "192.0.2.1:1234"
		w := httptest.NewRecorder()
		e.srv.Handler().ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", req.Method, path, body, w.Code, w.Body)
		}
		if w.Code >= 400 && w.Header().Get("Content-Type") != "application/problem+json" {
			t.Fatalf("%s %s %q: %d as %q: %s", req.Method, path, body, w.Code, w.Header().Get("Content-Type"), w.Body)
		}
	})
}
