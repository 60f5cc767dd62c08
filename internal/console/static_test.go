package console

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestStaticFilesGzipped: a browser that takes gzip gets the static files
// compressed, with their type, and they decompress to the files; one that
// does not gets them as they are.
func TestStaticFilesGzipped(t *testing.T) {
	h := http.StripPrefix("/ui/static/", staticHandler())
	want, err := fs.ReadFile(staticFiles, "static/coffer.css")
	if err != nil {
		t.Fatal(err)
	}
	get := func(accept string) *http.Response {
		req := httptest.NewRequest("GET", "/ui/static/coffer.css", nil)
		if accept != "" {
			req.Header.Set("Accept-Encoding", accept)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Result()
	}
	res := get("gzip, deflate, br")
	if res.StatusCode != 200 || res.Header.Get("Content-Encoding") != "gzip" || res.Header.Get("Content-Type") != "text/css; charset=utf-8" ||
		res.Header.Get("Vary") != "Accept-Encoding" {
		t.Fatalf("with gzip: %d, encoding %q, type %q, vary %q", res.StatusCode, res.Header.Get("Content-Encoding"), res.Header.Get("Content-Type"), res.Header.Get("Vary"))
	}
	zr, err := gzip.NewReader(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("decompressed file differs (%v)", err)
	}
	for _, accept := range []string{"", "identity", "gzip;q=0"} {
		res := get(accept)
		body, _ := io.ReadAll(res.Body)
		if res.Header.Get("Content-Encoding") != "" || !bytes.Equal(body, want) {
			t.Errorf("Accept-Encoding %q: encoding %q, %d bytes", accept, res.Header.Get("Content-Encoding"), len(body))
		}
	}
	req := httptest.NewRequest("GET", "/ui/static/missing.js", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 404 {
		t.Errorf("a missing file with gzip: %d", rec.Code)
	}
}

// TestFavicon: the address browsers ask for before any page names an
// icon answers with the console's icon, not 404.
func TestFavicon(t *testing.T) {
	mux := http.NewServeMux()
	New(Config{API: http.NotFoundHandler()}).Mount(mux)
	want, err := fs.ReadFile(staticFiles, "static/favicon.svg")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/favicon.ico", "/ui/static/favicon.svg"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != 200 || rec.Header().Get("Content-Type") != "image/svg+xml" || !bytes.Equal(rec.Body.Bytes(), want) {
			t.Errorf("%s: %d, type %q, %d bytes", path, rec.Code, rec.Header().Get("Content-Type"), rec.Body.Len())
		}
	}
}
