package server

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
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
	srv := &http.Server{
		Handler:           handler,
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
			cancelRequests()
			if err == nil {
				return nil
			}
			// The deadline passed with requests still running: they are
			// cancelled now; give them a moment to record it and answer
			// (their clients get their documents), then cut them off.
			grace, cancel := context.WithTimeout(context.Background(), abortGrace)
			defer cancel()
			if err := srv.Shutdown(grace); err != nil {
				return errors.Join(srv.Close(), ignoreDeadline(err))
			}
			return nil
		},
	}
}

func ignoreDeadline(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}
