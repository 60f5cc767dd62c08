package vsphere

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/soap"
)

func TestParseContentRange(t *testing.T) {
	for _, tc := range []struct {
		h      string
		status int
		want   int64
		ok     bool
	}{
		{"bytes 0-0/3158073", 206, 3158073, true},
		{"bytes 0-0/1", 206, 1, true},
		{"bytes */0", 416, 0, true},
		{"  bytes 0-0/42 ", 206, 42, true},
		{"", 206, 0, false},
		{"bytes", 206, 0, false},
		{"bytes ", 206, 0, false},
		{"items 0-0/10", 206, 0, false},
		{"bytes 0-0", 206, 0, false},
		{"bytes 0-0/*", 206, 0, false},
		{"bytes 0-0/", 206, 0, false},
		{"bytes 0-0/-5", 206, 0, false},
		{"bytes 0-0/12x", 206, 0, false},
		{"bytes 0-0/99999999999999999999999", 206, 0, false},
		{"bytes 5-5/10", 206, 0, false},
		{"bytes 0-0/0", 206, 0, false},
		{"bytes */10", 206, 0, false},
		{"bytes */10", 416, 0, false},
		{"bytes 0-0/10", 416, 0, false},
		{"bytes */*", 416, 0, false},
		{"bytes //", 206, 0, false},
	} {
		n, err := parseContentRange(tc.h, tc.status)
		if tc.ok && (err != nil || n != tc.want) {
			t.Errorf("%q (%d): %d, %v; want %d", tc.h, tc.status, n, err, tc.want)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "Content-Range")) {
			t.Errorf("%q (%d): %d, %v; want an error naming the header", tc.h, tc.status, n, err)
		}
	}
}

// TestProbeSize asks real HTTP servers: one doing ranges (empty and
// non-empty files), one ignoring Range, one answering nonsense.
func TestProbeSize(t *testing.T) {
	files := map[string][]byte{"/empty": nil, "/one": {7}, "/odd": randomBytes(t, 3<<20+12345)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/norange":
			w.Write(make([]byte, 777))
		case "/garbage":
			w.Header().Set("Content-Range", "bytes 0-0/lots")
			w.WriteHeader(http.StatusPartialContent)
		case "/missing":
			http.NotFound(w, r)
		default:
			http.ServeContent(w, r, "f", time.Time{}, bytes.NewReader(files[r.URL.Path]))
		}
	}))
	defer srv.Close()
	base, _ := url.Parse(srv.URL)
	sc := soap.NewClient(base, true)
	ctx := context.Background()
	for path, want := range map[string]int64{"/empty": 0, "/one": 1, "/odd": 3<<20 + 12345, "/norange": 777,
		"/garbage": -1, "/missing": -1} {
		u := *base
		u.Path = path
		n, err := probeSize(ctx, &httpDisk{sc: sc, u: &u})
		if want >= 0 && (err != nil || n != want) {
			t.Errorf("%s: %d, %v; want %d", path, n, err, want)
		}
		if want < 0 && err == nil {
			t.Errorf("%s: %d without an error", path, n)
		}
	}
}
