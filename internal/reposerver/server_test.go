package reposerver_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/reposerver"
	"github.com/coffer-backup/coffer/internal/reposerver/reposervertest"
	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/remote"
)

func open(t *testing.T, srv *reposervertest.Server, r reposerver.Right) *remote.Store {
	t.Helper()
	st, err := remote.Open(context.Background(), remote.Config{URL: srv.URL, CAFile: srv.CAFile, Credential: srv.Secrets[r]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// repositoryNames are objects of each kind a repository holds.
var repositoryNames = []string{"config", "keys/k1", "data/ab12", "index/i1", "snapshots/s1", "maps/m1", "gc/plan", "locks/maintenance"}

// TestAStolenAppendCredentialDeletesNothing: with an append credential,
// every destructive request (an overwrite, a conditional replace, a
// delete) of every kind of object is refused, and the object is left as
// it was; what a backup needs (new objects, its leases) works. A read
// credential writes nothing but leases.
func TestAStolenAppendCredentialDeletesNothing(t *testing.T) {
	srv := reposervertest.Start(t, reposerver.DefaultOptions)
	ctx := context.Background()
	maintain, appendOnly, read := open(t, srv, reposerver.Maintain), open(t, srv, reposerver.Append), open(t, srv, reposerver.Read)
	versions := map[string]string{}
	for _, n := range repositoryNames {
		fi, err := store.Put(ctx, maintain, n, []byte("original "+n), store.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		versions[n] = fi.Version
	}
	for _, n := range repositoryNames {
		if strings.HasPrefix(n, "locks/") {
			continue
		}
		for _, st := range []*remote.Store{appendOnly, read} {
			for how, opts := range map[string]store.PutOptions{"overwrite": {}, "replace": {IfMatch: versions[n]}, "retained overwrite": {RetainUntil: time.Now().Add(time.Hour)}} {
				if _, err := store.Put(ctx, st, n, []byte("tampered"), opts); err == nil {
					t.Errorf("%s credential: %s of %s succeeded", st.Right(), how, n)
				}
			}
			if err := st.Delete(ctx, n); !errors.Is(err, store.ErrPermission) {
				t.Errorf("%s credential: delete %s: %v, want permission denied", st.Right(), n, err)
			}
		}
		if b, err := store.Get(ctx, read, n, 0, -1); err != nil || string(b) != "original "+n {
			t.Errorf("%s after the attacks: %q, %v", n, b, err)
		}
	}
	// What a backup does.
	if _, err := store.Put(ctx, appendOnly, "data/cd34", []byte("new pack"), store.PutOptions{}); err != nil {
		t.Fatalf("append: a new object: %v", err)
	}
	for _, st := range []*remote.Store{appendOnly, read} {
		lease := "locks/" + st.Right()
		fi, err := store.Put(ctx, st, lease, []byte("lease"), store.PutOptions{})
		if err == nil {
			_, err = store.Put(ctx, st, lease, []byte("refreshed"), store.PutOptions{IfMatch: fi.Version})
		}
		if err == nil {
			err = st.Delete(ctx, lease)
		}
		if err != nil {
			t.Fatalf("%s credential: its lease: %v", st.Right(), err)
		}
	}
	if _, err := store.Put(ctx, read, "data/ef56", []byte("x"), store.PutOptions{}); !errors.Is(err, store.ErrPermission) {
		t.Fatalf("read credential: a new object: %v, want permission denied", err)
	}
	if err := maintain.Delete(ctx, "snapshots/s1"); err != nil {
		t.Fatalf("maintain credential: delete: %v", err)
	}
}

// TestBadRequestsStoreNothing: a wrong credential, a body cut short or
// not matching its commit trailer, a name that climbs out, an oversized
// body and a stalled client each get a clear answer; nothing is stored,
// nothing outside the repository is touched, and the server keeps
// serving others.
func TestBadRequestsStoreNothing(t *testing.T) {
	o := reposerver.DefaultOptions
	o.MaxObjectBytes, o.IdleTimeout = 1<<20, 2*time.Second
	srv := reposervertest.Start(t, o)
	secret := srv.Secrets[reposerver.Maintain]
	hc := client(t, srv)
	put := func(name string, body io.Reader, trailer string, cred string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/v1/objects/"+name, body)
		req.Header.Set("Authorization", "Bearer "+cred)
		req.ContentLength = -1
		if trailer != "" {
			req.Trailer = http.Header{"X-Coffer-Commit": {trailer}}
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, strings.TrimSpace(string(b))
	}
	cases := []struct {
		what, name string
		body       io.Reader
		trailer    string
		cred       string
		status     int
	}{
		{"a wrong credential", "data/a1", strings.NewReader("x"), commitSum("x"), "coffer-repo-guess", http.StatusUnauthorized},
		{"no commit trailer", "data/a2", strings.NewReader("x"), "", secret, http.StatusBadRequest},
		{"a tampered body", "data/a3", strings.NewReader("y"), commitSum("x"), secret, http.StatusBadRequest},
		{"an oversized body", "data/a4", bytes.NewReader(make([]byte, 2<<20)), commitSum(string(make([]byte, 2<<20))), secret, http.StatusBadRequest},
		// The request's path is cleaned before routing: it names no object.
		{"a climbing name", "data/../../escape", strings.NewReader("x"), commitSum("x"), secret, http.StatusNotFound},
		{"an escaped climbing name", "data/%2e%2e/%2e%2e/%2e%2e/escape", strings.NewReader("x"), commitSum("x"), secret, http.StatusBadRequest},
		{"a hidden name", "data/.cas-lock", strings.NewReader("x"), commitSum("x"), secret, http.StatusBadRequest},
	}
	for _, c := range cases {
		resp, msg := put(c.name, c.body, c.trailer, c.cred)
		if resp == nil || resp.StatusCode != c.status || msg == "" {
			t.Errorf("%s: %v %q, want %d with a message", c.what, resp, msg, c.status)
		} else {
			t.Logf("%s: %d %s", c.what, resp.StatusCode, msg)
		}
	}
	// A stalled client: headers and a part of the body, then nothing.
	conn, err := tls.Dial("tcp", strings.TrimPrefix(srv.URL, "https://"), hc.Transport.(*http.Transport).TLSClientConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "PUT /v1/objects/data/a5 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nTransfer-Encoding: chunked\r\nTrailer: X-Coffer-Commit\r\n\r\n4\r\nhalf\r\n", secret)
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute)) // a bound, should the server never cut it
	answer, _ := bufio.NewReader(conn).ReadString('\n')
	t.Logf("a stalled client was answered %q and cut after %s", strings.TrimSpace(answer), time.Since(start).Round(time.Millisecond))
	if time.Since(start) >= time.Minute {
		t.Fatal("the server kept a stalled client for a minute")
	}
	// Nothing of the above was stored, nothing escaped, and the server
	// serves an honest client.
	st := open(t, srv, reposerver.Read)
	var names []string
	if err := st.List(context.Background(), "", func(fi store.ObjectInfo) error { names = append(names, fi.Name); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(names) != 0 {
		t.Fatalf("objects stored by bad requests: %v", names)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(srv.Dir), "escape")); err == nil {
		t.Fatal("a climbing name wrote outside the repository")
	}
	if _, err := store.Put(context.Background(), open(t, srv, reposerver.Append), "data/a6", []byte("ok"), store.PutOptions{}); err != nil {
		t.Fatalf("an honest client after the bad requests: %v", err)
	}
}
