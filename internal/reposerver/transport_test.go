package reposerver_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/reposerver"
	"github.com/coffer-backup/coffer/internal/reposerver/reposervertest"
	"github.com/coffer-backup/coffer/internal/store"
)

// TestPacksBypassTheServersPageCache: an object the client announces as
// large (a pack) is written by the server past its page cache, as the
// local store writes it, although its body has no length (it is chunked,
// for its commit trailer); a small one (a lease) goes through the cache.
// Through the page cache, writing the packs cost the server more CPU than
// the rest of a backup's requests.
func TestPacksBypassTheServersPageCache(t *testing.T) {
	srv := reposervertest.Start(t, reposerver.DefaultOptions)
	if !directIO(t, srv.Dir) {
		t.Skipf("%s has no O_DIRECT (tmpfs?): no page cache to bypass", srv.Dir)
	}
	st := open(t, srv, reposerver.Append)
	ctx := context.Background()
	pack := make([]byte, 8<<20+123)
	_, _ = rand.Read(pack)
	if _, err := store.Put(ctx, st, "data/abcd01", pack, store.PutOptions{SizeHint: 16 << 20}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(ctx, st, "locks/l1", []byte("a lease"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	inCache, pages := resident(t, filepath.Join(srv.Dir, "data", "ab", "abcd01"))
	t.Logf("pack: %d of its %d pages in the server's page cache", inCache, pages)
	// Only the unaligned tail goes through the cache.
	if inCache > 1 {
		t.Fatalf("pack: %d of its %d pages in the server's page cache, want at most its tail", inCache, pages)
	}
	if inCache, pages := resident(t, filepath.Join(srv.Dir, "locks", "l1")); inCache != pages {
		t.Fatalf("lease: %d of its %d pages in the page cache: small objects should go through it", inCache, pages)
	}
	if got, err := store.Get(ctx, st, "data/abcd01", 0, -1); err != nil || !bytes.Equal(got, pack) {
		t.Fatalf("the pack read back: %d bytes, %v", len(got), err)
	}
}

// directIO reports whether dir's file system takes O_DIRECT.
func directIO(t *testing.T, dir string) bool {
	f, err := os.OpenFile(filepath.Join(dir, ".direct-probe"), os.O_CREATE|os.O_WRONLY|unix.O_DIRECT, 0o600)
	if err != nil {
		return false
	}
	_ = f.Close()
	if err := os.Remove(f.Name()); err != nil {
		t.Fatal(err)
	}
	return true
}

// resident counts the pages of file in the page cache (mincore(2)).
func resident(t *testing.T, file string) (inCache, pages int) {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Munmap(m) }()
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	for _, v := range vec {
		inCache += int(v & 1)
	}
	return inCache, len(vec)
}

// TestTheServerSpeaksHTTP1: a client offering HTTP/2 gets HTTP/1.1, a
// TLS connection per request in flight (wire.Protocols says why).
func TestTheServerSpeaksHTTP1(t *testing.T) {
	srv := reposerver.New(nil, nil, reposerver.DefaultOptions, slog.New(slog.DiscardHandler))
	// httptest's certificate, from a server of its own closed at once.
	ts := httptest.NewTLSServer(nil)
	cert := ts.TLS.Certificates[0]
	ts.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, hs, func() error { return hs.ServeTLS(ln, "", "") }) }()
	t.Cleanup(func() { cancel(); <-done })
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := (&http.Client{Transport: tr}).Get("https://" + ln.Addr().String() + "/v1/properties")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Proto != "HTTP/1.1" || resp.TLS.NegotiatedProtocol == "h2" {
		t.Fatalf("answered over %s (ALPN %q), want HTTP/1.1", resp.Proto, resp.TLS.NegotiatedProtocol)
	}
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an unauthenticated request: %s", resp.Status)
	}
}
