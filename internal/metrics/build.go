package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/coffer-backup/coffer/internal/version"
)

// newBuildInfo is coffer_build_info: always 1, its labels say which
// coffer answers, so a dashboard can tell the versions of a fleet in a
// rolling upgrade (the Prometheus convention for build information).
func newBuildInfo() prometheus.Collector {
	i := version.Get()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "coffer_build_info",
		Help: "Always 1; its labels name this process's coffer: version (a tag, or git describe's distance from one), revision (the commit) and goversion."},
		[]string{"version", "revision", "goversion"})
	g.WithLabelValues(i.Version, i.Revision, i.GoVersion).Set(1)
	return g
}
