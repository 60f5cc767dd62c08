// Package reposervertest starts a real repository server (over TLS, on
// loopback) for tests, with one credential per right.
package reposervertest

import (
	"encoding/pem"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/coffer-backup/coffer/internal/reposerver"
	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/local"
)

// Server is a started repository server.
type Server struct {
	URL     string
	CAFile  string
	Dir     string // the served store's directory
	Secrets map[reposerver.Right]string
	Server  *reposerver.Server
}

// Start serves a new local store in a temporary directory.
func Start(t testing.TB, o reposerver.Options) *Server { return start(t, o, false) }

// StartImmutable serves a new local store whose retained objects are
// made immutable (reposerver.Immutable).
func StartImmutable(t testing.TB, o reposerver.Options) *Server { return start(t, o, true) }

func start(t testing.TB, o reposerver.Options, immutable bool) *Server {
	dir := t.TempDir()
	st, err := local.Create(filepath.Join(dir, "repo"))
	if err != nil {
		t.Fatal(err)
	}
	var served store.Store = st
	if immutable {
		im, err := reposerver.NewImmutable(st)
		if err != nil {
			t.Fatal(err)
		}
		served = im
		// The flags outlive the test: clear them so that its directory
		// can be removed.
		t.Cleanup(func() { reposerver.ClearImmutable(t, st.Root()) })
	}
	s := &Server{Dir: filepath.Join(dir, "repo"), Secrets: map[reposerver.Right]string{}}
	var creds []reposerver.Credential
	for _, r := range []reposerver.Right{reposerver.Read, reposerver.Append, reposerver.Maintain} {
		secret, sum := reposerver.NewSecret()
		s.Secrets[r] = secret
		creds = append(creds, reposerver.Credential{Name: string(r) + "-client", Right: r, SHA256: sum})
	}
	s.Server = reposerver.New(served, creds, o, slog.New(slog.DiscardHandler))
	hs := httptest.NewUnstartedServer(s.Server.Handler())
	hs.EnableHTTP2 = false
	hs.StartTLS()
	t.Cleanup(hs.Close)
	s.URL = hs.URL
	s.CAFile = filepath.Join(dir, "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hs.Certificate().Raw})
	if err := os.WriteFile(s.CAFile, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}
