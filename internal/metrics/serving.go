package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// servingGauges are what an operator checks of a server before anything
// else: whether it reaches its catalog, and when its TLS certificate
// ends. Live gauges: the server and the health monitor set them.
type servingGauges struct {
	catalogReachable prometheus.Gauge
	certExpiry       prometheus.Gauge
}

func newServingGauges(r *prometheus.Registry) servingGauges {
	g := servingGauges{
		catalogReachable: prometheus.NewGauge(prometheus.GaugeOpts{Name: "coffer_catalog_reachable",
			Help: "1 when the health monitor's last query of the catalog answered, 0 when it failed (checked every health-every)."}),
		certExpiry: prometheus.NewGauge(prometheus.GaugeOpts{Name: "coffer_tls_certificate_expiry_timestamp_seconds",
			Help: "When the TLS certificate the server serves ends (its NotAfter); absent when the server serves plain HTTP."}),
	}
	r.MustRegister(g.catalogReachable)
	return g
}

// SetCatalogReachable records whether the catalog answered.
func (m *Metrics) SetCatalogReachable(ok bool) {
	if ok {
		m.serving.catalogReachable.Set(1)
	} else {
		m.serving.catalogReachable.Set(0)
	}
}

// SetCertificateExpiry records when the served TLS certificate ends. It
// is registered only then, so a plain-HTTP server has no series to
// alert on.
func (m *Metrics) SetCertificateExpiry(notAfter time.Time) {
	m.serving.certExpiry.Set(seconds(notAfter))
	_ = m.live.Register(m.serving.certExpiry) // AlreadyRegistered on a second call: the value is set either way
}
