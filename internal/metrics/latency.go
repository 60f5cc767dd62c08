package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/coffer-backup/coffer/internal/engine"
)

// latencyCollector reads the engine's latency watch (the latency-control
// section) at each scrape: a datastore has series while backups read
// from it, a task's rate limit while it is throttled.
type latencyCollector struct {
	m                                     *Metrics
	latency, threshold, congested, limits *prometheus.Desc
}

func newLatencyCollector(m *Metrics) *latencyCollector {
	ds := []string{"connection", "datastore"}
	return &latencyCollector{m: m,
		latency: prometheus.NewDesc("coffer_datastore_latency_seconds",
			"Mean latency of the I/O of a datastore of the latency-control section while backups read from it, over the last interval: the worst of its sources (its block device, the disks of the VMs being read); absent for an interval without I/O.", ds, nil),
		threshold: prometheus.NewDesc("coffer_datastore_latency_threshold_seconds", "The datastore's congestion threshold (latency-control).", ds, nil),
		congested: prometheus.NewDesc("coffer_datastore_congested", "1 while the datastore's latency is above its threshold, else 0.", ds, nil),
		limits: prometheus.NewDesc("coffer_backup_read_rate_limit_bytes_per_second",
			"Read rate a throttled backup task is held to on the datastore (absent when it is not throttled).", append(ds, "policy", "vm"), nil),
	}
}

func (c *latencyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.latency
	ch <- c.threshold
	ch <- c.congested
	ch <- c.limits
}

func (c *latencyCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	f := c.m.latency
	c.m.mu.Unlock()
	if f == nil {
		return
	}
	for _, d := range f() {
		if d.Sampled {
			ch <- prometheus.MustNewConstMetric(c.latency, prometheus.GaugeValue, d.Latency.Seconds(), d.Connection, d.Datastore)
		}
		ch <- prometheus.MustNewConstMetric(c.threshold, prometheus.GaugeValue, d.Threshold.Seconds(), d.Connection, d.Datastore)
		congested := 0.0
		if d.Congested {
			congested = 1
		}
		ch <- prometheus.MustNewConstMetric(c.congested, prometheus.GaugeValue, congested, d.Connection, d.Datastore)
		for _, r := range d.Readers {
			if r.Rate > 0 {
				ch <- prometheus.MustNewConstMetric(c.limits, prometheus.GaugeValue, r.Rate, d.Connection, d.Datastore, r.Policy, r.VM)
			}
		}
	}
}

// SetLatency says where the engine's latency watch is read (nil: none).
func (m *Metrics) SetLatency(f func() []engine.DatastoreLatency) {
	m.mu.Lock()
	m.latency = f
	m.mu.Unlock()
}
