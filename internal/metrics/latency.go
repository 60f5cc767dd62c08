package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/coffer-backup/coffer/internal/engine"
)

// latencyCollector reads a latency watch (the latency-control section) at
// each scrape: a datastore has series while backups read from it, a
// task's rate limit while it is throttled. A server's reads its engine's
// watch; a worker's (WorkerHandler) its own, which throttles the units it
// runs.
type latencyCollector struct {
	source                                func() []engine.DatastoreLatency
	latency, threshold, congested, limits *prometheus.Desc
}

// latencyNames are a latency collector's metric names.
type latencyNames struct{ latency, threshold, congested, limits string }

var (
	serverLatencyNames = latencyNames{"coffer_datastore_latency_seconds", "coffer_datastore_latency_threshold_seconds",
		"coffer_datastore_congested", "coffer_backup_read_rate_limit_bytes_per_second"}
	workerLatencyNames = latencyNames{"coffer_worker_datastore_latency_seconds", "coffer_worker_datastore_latency_threshold_seconds",
		"coffer_worker_datastore_congested", "coffer_worker_read_rate_limit_bytes_per_second"}
)

func newLatencyCollector(n latencyNames, constLabels prometheus.Labels, source func() []engine.DatastoreLatency) *latencyCollector {
	ds := []string{"connection", "datastore"}
	return &latencyCollector{source: source,
		latency: prometheus.NewDesc(n.latency,
			"Mean latency of the I/O of a datastore of the latency-control section while backups read from it, over the last interval: the worst of its sources (its block device, the disks of the VMs being read); absent for an interval without I/O.", ds, constLabels),
		threshold: prometheus.NewDesc(n.threshold, "The datastore's congestion threshold (latency-control).", ds, constLabels),
		congested: prometheus.NewDesc(n.congested, "1 while the datastore's latency is above its threshold, else 0.", ds, constLabels),
		limits: prometheus.NewDesc(n.limits,
			"Read rate a throttled backup task is held to on the datastore (absent when it is not throttled).", append(ds, "policy", "vm"), constLabels),
	}
}

func (c *latencyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.latency
	ch <- c.threshold
	ch <- c.congested
	ch <- c.limits
}

func (c *latencyCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.source
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

// engineLatency is the engine's latency watch as last set.
func (m *Metrics) engineLatency() []engine.DatastoreLatency {
	m.mu.Lock()
	f := m.latency
	m.mu.Unlock()
	if f == nil {
		return nil
	}
	return f()
}

// workerRegistry holds a worker's metrics: its latency watch, as
// coffer_worker_* series labelled by the worker (each worker throttles
// only its own units, from its own host: the servers' metrics cannot
// show it), with Go's and the process's collectors.
func workerRegistry(worker string, latency func() []engine.DatastoreLatency) *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(newLatencyCollector(workerLatencyNames, prometheus.Labels{"worker": worker}, latency),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// WorkerHandler serves a worker's metrics (coffer worker
// --metrics-listen), read from latency at each scrape.
func WorkerHandler(worker string, latency func() []engine.DatastoreLatency) http.Handler {
	return promhttp.HandlerFor(workerRegistry(worker, latency), promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
