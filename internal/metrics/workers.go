package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// workerGauges are the fleet's per-worker gauges, set by the leading
// server's watch of the workers each time it looks (internal/fleet),
// never by a scrape.
type workerGauges struct {
	state, slots, slotsInUse, heartbeat *prometheus.GaugeVec
}

// workerStates are the states of coffer_worker_state: every worker has a
// series of each, 1 for the one it is in, so that an alert on "lost" does
// not wait for a series to appear.
var workerStates = []catalog.WorkerState{catalog.WorkerStarting, catalog.WorkerReady, catalog.WorkerDraining, catalog.WorkerLost}

func newWorkerGauges(gauge func(name, help string, labels ...string) *prometheus.GaugeVec) workerGauges {
	return workerGauges{
		state: gauge("coffer_worker_state",
			"1 for the state a worker of the fleet is in (starting, ready, draining, lost), 0 for the others; set by the server that leads.", "worker", "state"),
		slots:      gauge("coffer_worker_slots", "Tasks a worker of the fleet runs at once (its slots).", "worker"),
		slotsInUse: gauge("coffer_worker_slots_in_use", "Slots of a worker of the fleet granted to running tasks.", "worker"),
		heartbeat:  gauge("coffer_worker_heartbeat_timestamp_seconds", "Time of a worker's last heartbeat (by its clock).", "worker"),
	}
}

// SetWorkers replaces the worker gauges with the registry's rows: series
// of workers gone (drained and deregistered) disappear.
func (m *Metrics) SetWorkers(ws []catalog.Worker) {
	m.setMu.Lock()
	defer m.setMu.Unlock()
	defer m.render()
	g := m.workers
	for _, v := range []*prometheus.GaugeVec{g.state, g.slots, g.slotsInUse, g.heartbeat} {
		v.Reset()
	}
	for _, w := range ws {
		for _, s := range workerStates {
			v := 0.0
			if w.State == s {
				v = 1
			}
			g.state.WithLabelValues(w.Name, string(s)).Set(v)
		}
		g.slots.WithLabelValues(w.Name).Set(float64(w.Slots))
		g.slotsInUse.WithLabelValues(w.Name).Set(0) // the dispatcher grants workers no slots yet
		g.heartbeat.WithLabelValues(w.Name).Set(seconds(w.HeartbeatAt))
	}
}
