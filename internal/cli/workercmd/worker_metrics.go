package workercmd

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/fleet"
	"github.com/coffer-backup/coffer/internal/metrics"
)

// listenMetrics opens the worker's metrics address (--metrics-listen;
// nil for ""), before the worker registers: a bad address is refused
// before it takes any work.
func listenMetrics(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, command.Usagef("--metrics-listen: %v", err)
	}
	return ln, nil
}

// serveMetrics serves the worker's metrics (metrics.WorkerHandler: how
// its latency watch throttles its units) on ln at /metrics, until the
// returned function is called. Plain HTTP with no authentication, as a
// node exporter's: bind it to an address only the monitoring reaches.
func serveMetrics(ln net.Listener, m *fleet.Member, log *slog.Logger) (stop func()) {
	if ln == nil {
		return func() {}
	}
	name := m.Worker().Name
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.WorkerHandler(name, m.Latency))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("the worker's metrics are no longer served", "worker", name, "err", err)
		}
	}()
	log.Info("worker metrics served", "worker", name, "url", "http://"+ln.Addr().String()+"/metrics")
	return func() { _ = srv.Close() }
}
