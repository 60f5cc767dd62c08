package metrics

import (
	"bytes"
	"compress/gzip"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// rendering is the health monitor's gauges as of their last change:
// gathered (for the formats other than text and for Gatherer) and encoded
// in Prometheus' text format (what Prometheus and curl ask for).
type rendering struct {
	families []*dto.MetricFamily
	text     []byte
}

// render gathers and encodes the set gauges; the caller holds setMu.
// Both are read-only once stored: scrapes share them.
func (m *Metrics) render() {
	families, err := m.set.Gather()
	if err != nil {
		// Gauges registered here with fixed label names cannot be
		// inconsistent; a scrape still gets what was gathered.
		slog.Warn("metrics: gathering the health monitor's gauges", "err", err)
	}
	var text bytes.Buffer
	enc := expfmt.NewEncoder(&text, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			slog.Warn("metrics: encoding the health monitor's gauges", "metric", f.GetName(), "err", err)
		}
	}
	m.rendered.Store(&rendering{families: families, text: text.Bytes()})
}

// Handler serves the metrics (the server mounts it at /metrics). A
// scrape in the text format gathers the live collectors and copies the
// monitor's gauges as rendered; one in another format (protocol buffers),
// or asking for some metrics by name (name[]), is served by promhttp from
// the same two sources.
func (m *Metrics) Handler() http.Handler {
	full := promhttp.HandlerFor(m.Gatherer(), promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		format := expfmt.NegotiateAccept(r.Header, expfmt.DefaultAcceptedFormats()...)
		if format.FormatType() != expfmt.TypeTextPlain || r.URL.Query().Has("name[]") {
			full.ServeHTTP(w, r)
			return
		}
		live, err := m.live.Gather()
		if err != nil {
			// As promhttp's ContinueOnError: serve what was gathered.
			slog.Warn("metrics: gathering", "err", err)
		}
		w.Header().Set("Content-Type", string(format))
		w.Header().Add("Vary", "Accept-Encoding")
		var out io.Writer = w
		if acceptsGzip(r) {
			w.Header().Set("Content-Encoding", "gzip")
			gz := gzips.Get().(*gzip.Writer)
			gz.Reset(w)
			defer func() { _ = gz.Close(); gzips.Put(gz) }()
			out = gz
		}
		enc := expfmt.NewEncoder(out, format)
		for _, f := range live {
			if err := enc.Encode(f); err != nil {
				return // the client went away
			}
		}
		_, _ = out.Write(m.rendered.Load().text)
	})
}

// gzips are compressors at the fastest level: 1 MiB of series (10,000
// VMs) in about 1.5 ms, against 7 ms at the default level, for an answer
// about 10% larger.
var gzips = sync.Pool{New: func() any {
	gz, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return gz
}}

// acceptsGzip reports whether the request's Accept-Encoding offers gzip
// (and not with q=0).
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			q := strings.ReplaceAll(params, " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}
