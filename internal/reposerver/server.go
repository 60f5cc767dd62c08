// Package reposerver is coffer's repository server (`coffer repository
// serve`): it serves one repository's store over HTTPS to the servers and
// workers of coffer, each with a credential of its own and one right
// (read, append, maintain). It runs on the storage host as its own
// unprivileged user, so that neither a stolen client credential nor root
// on a backup server can delete what an append credential wrote. Clients
// reach it through internal/store/remote; the protocol is in
// internal/store/remote/wire.
package reposerver

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/remote/wire"
)

// Options bound what one request may cost the server.
type Options struct {
	// MaxObjectBytes is the largest object a PUT may write.
	MaxObjectBytes int64
	// IdleTimeout cuts a request whose client sends nothing for this long
	// (a slow or stalled client holds no slot for ever).
	IdleTimeout time.Duration
	// Connections is what the server advertises as the parallel requests
	// it serves well.
	Connections int
}

// DefaultOptions are the server's defaults: objects up to 1 GiB (packs
// are far smaller), 30 s of silence.
var DefaultOptions = Options{MaxObjectBytes: 1 << 30, IdleTimeout: 30 * time.Second, Connections: 8}

// Server serves one store.
type Server struct {
	st    store.Store
	o     Options
	log   *slog.Logger
	creds atomic.Pointer[map[string]Credential] // by the secret's SHA-256
}

// New serves st to the holders of creds.
func New(st store.Store, creds []Credential, o Options, log *slog.Logger) *Server {
	s := &Server{st: st, o: o, log: log}
	s.SetCredentials(creds)
	return s
}

// SetCredentials replaces the credentials in force (a reload): requests
// from then on are checked against the new set.
func (s *Server) SetCredentials(creds []Credential) {
	m := make(map[string]Credential, len(creds))
	for _, c := range creds {
		m[strings.ToLower(c.SHA256)] = c
	}
	s.creds.Store(&m)
}

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+wire.ObjectsPath+"{name...}", s.authed(s.get))
	mux.HandleFunc("HEAD "+wire.ObjectsPath+"{name...}", s.authed(s.head))
	mux.HandleFunc("PUT "+wire.ObjectsPath+"{name...}", s.authed(s.put))
	mux.HandleFunc("DELETE "+wire.ObjectsPath+"{name...}", s.authed(s.delete))
	mux.HandleFunc("POST "+wire.RetainPath+"{name...}", s.authed(s.retain))
	mux.HandleFunc("GET "+wire.ListPath, s.authed(s.list))
	mux.HandleFunc("GET "+wire.PropertiesPath, s.authed(s.properties))
	return mux
}

type handler func(w http.ResponseWriter, r *http.Request, c Credential)

// authed finds the request's credential, or answers 401.
func (s *Server) authed(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		secret, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		c, known := (*s.creds.Load())[hashSecret(strings.TrimSpace(secret))]
		if !ok || !known {
			s.log.Warn("repository server: request refused: unknown credential", "remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path)
			s.fail(w, r, wire.ErrUnauthenticated)
			return
		}
		h(w, r, c)
	}
}

// fail answers a failed request with its code; the message names what
// failed but never a credential.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code, status := wire.CodeOf(err)
	if status == http.StatusInternalServerError {
		s.log.Error("repository server: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	w.Header().Set(wire.ErrorHeader, code)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write([]byte(err.Error() + "\n"))
	}
}

// invalid answers 400 for a request the protocol does not allow.
func (s *Server) invalid(w http.ResponseWriter, msg string) {
	w.Header().Set(wire.ErrorHeader, wire.CodeInvalid)
	http.Error(w, msg, http.StatusBadRequest)
}

// objectName is the request's object name, checked.
func (s *Server) objectName(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.PathValue("name")
	if err := checkName(name); err != nil {
		s.invalid(w, err.Error())
		return "", false
	}
	return name, true
}

// Serve runs the server on hs (its TLS configured by the caller) until
// ctx ends, then shuts down, letting requests in flight finish for 10 s.
func (s *Server) Serve(ctx context.Context, hs *http.Server, listen func() error) error {
	hs.Handler = s.Handler()
	hs.Protocols = wire.Protocols()
	hs.ReadHeaderTimeout = s.o.IdleTimeout
	hs.IdleTimeout = 2 * s.o.IdleTimeout
	errc := make(chan error, 1)
	go func() { errc <- listen() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}
