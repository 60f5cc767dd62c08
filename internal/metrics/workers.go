package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// workerCollector holds the fleet's per-worker gauges, as the leading
// server's watch of the workers last saw the registry (internal/fleet),
// and gives them at each scrape. They are a few series per worker, set
// at every look of the watch (a tenth of worker-dead-after): unlike the
// monitor's per-VM gauges, they are not worth rendering at each change,
// which re-encoded every VM's series at each look.
type workerCollector struct {
	seen                                *atomic.Pointer[[]catalog.Worker]
	state, slots, slotsInUse, heartbeat *prometheus.Desc
}

// workerStates are the states of coffer_worker_state: every worker has a
// series of each, 1 for the one it is in, so that an alert on "lost" does
// not wait for a series to appear.
var workerStates = []catalog.WorkerState{catalog.WorkerStarting, catalog.WorkerReady, catalog.WorkerDraining, catalog.WorkerLost}

func newWorkerCollector(seen *atomic.Pointer[[]catalog.Worker]) *workerCollector {
	return &workerCollector{seen: seen,
		state: prometheus.NewDesc("coffer_worker_state",
			"1 for the state a worker of the fleet is in (starting, ready, draining, lost), 0 for the others; set by the server that leads.", []string{"worker", "state"}, nil),
		slots:      prometheus.NewDesc("coffer_worker_slots", "Tasks a worker of the fleet runs at once (its slots).", []string{"worker"}, nil),
		slotsInUse: prometheus.NewDesc("coffer_worker_slots_in_use", "Slots of a worker of the fleet granted to running tasks.", []string{"worker"}, nil),
		heartbeat:  prometheus.NewDesc("coffer_worker_heartbeat_timestamp_seconds", "Time of a worker's last heartbeat (by its clock).", []string{"worker"}, nil),
	}
}

func (c *workerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.state
	ch <- c.slots
	ch <- c.slotsInUse
	ch <- c.heartbeat
}

func (c *workerCollector) Collect(ch chan<- prometheus.Metric) {
	ws := c.seen.Load()
	if ws == nil {
		return
	}
	for _, w := range *ws {
		for _, s := range workerStates {
			v := 0.0
			if w.State == s {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, v, w.Name, string(s))
		}
		ch <- prometheus.MustNewConstMetric(c.slots, prometheus.GaugeValue, float64(w.Slots), w.Name)
		ch <- prometheus.MustNewConstMetric(c.slotsInUse, prometheus.GaugeValue, 0, w.Name) // the dispatcher grants workers no slots yet
		ch <- prometheus.MustNewConstMetric(c.heartbeat, prometheus.GaugeValue, seconds(w.HeartbeatAt), w.Name)
	}
}

// SetWorkers replaces the worker gauges with the registry's rows: series
// of workers gone (drained and deregistered) disappear.
func (m *Metrics) SetWorkers(ws []catalog.Worker) {
	seen := append([]catalog.Worker(nil), ws...)
	m.workers.Store(&seen)
}
