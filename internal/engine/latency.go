package engine

import (
	"github.com/coffer-backup/coffer/internal/engine/latency"
	"github.com/coffer-backup/coffer/internal/policy"
)

// DatastoreLatency is a watched datastore's state (metrics).
type DatastoreLatency = latency.Datastore

// LatencyReader is a task reading from a watched datastore.
type LatencyReader = latency.Reader

// Latency lists the datastores being watched now, for the metrics.
func (e *Engine) Latency() []DatastoreLatency { return e.watch.Datastores() }

// latencyUnit is the task's attempt as the latency watch sees it, its
// own bucket at perTask bytes/s (task.ceiling).
func (t *task) latencyUnit(perTask policy.ByteRate) latency.Unit {
	return latency.Unit{Control: t.j.s.cfg.LatencyControl, Connection: t.rec.Connection, Policy: t.j.p.Name, VM: t.vm.Name,
		Datastores: t.vm.Datastores, Shares: t.j.p.Shares.Value(), Ceiling: t.ceiling(perTask), Repository: t.j.w, Event: t.event}
}
