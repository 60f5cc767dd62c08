package server

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Timeouts of the HTTP server. Answers have no write timeout: a restore
// or a verify answers when it is done, and a download streams for as
// long as it takes; the client's going away cancels the operation.
const (
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 2 * time.Minute
	// abortGrace is how long drained requests, once cancelled, have to
	// return before their connections are closed under them.
	abortGrace = 30 * time.Second
)

// HTTP is the component serving the handler on ln: with TLS when cert
// is given, plain HTTP otherwise (CheckPlainHTTP says where that is
// allowed). Draining stops accepting, lets running requests finish until
// the deadline, then cancels them (their operations end as cancelled)
// and waits for them.
func HTTP(handler http.Handler, ln net.Listener, cert *Certificate, logger *slog.Logger) Component {
	base, cancelRequests := context.WithCancel(context.Background())
	var active sync.WaitGroup
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			active.Add(1)
			defer active.Done()
			handler.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	if cert != nil {
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert.Certificate}}
	}
	return Component{
		Name: "http",
		Start: func(context.Context) (<-chan error, error) {
			done := make(chan error, 1)
			go func() {
				var err error
				if cert != nil {
					err = srv.ServeTLS(ln, "", "")
				} else {
					err = srv.Serve(ln)
				}
				if errors.Is(err, http.ErrServerClosed) {
					return // drained
				}
				done <- err
			}()
			return done, nil
		},
		Drain: func(ctx context.Context) error {
			err := srv.Shutdown(ctx)
			if err == nil {
				cancelRequests()
				return nil
			}
			// The deadline passed with requests still running: cancel
			// them, give them a moment to record it, then cut them off.
			cancelRequests()
			waited := make(chan struct{})
			go func() {
				active.Wait()
				close(waited)
			}()
			select {
			case <-waited:
			case <-time.After(abortGrace):
			}
			return errors.Join(srv.Close(), ignoreDeadline(err))
		},
	}
}

func ignoreDeadline(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}
