package engine

import (
	"github.com/coffer-backup/coffer/internal/engine/ratelimit"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
)

// setup is what the engine starts jobs with: the configuration, its
// limits and the connectors. A job keeps the setup it started with (its
// connectors, resource groups, repository streams and per-task rate), so
// a reload never changes a run halfway; the engine-wide caps (VM tasks in
// flight, the I/O rate in total) are shared by every job and change for
// all of them at once.
type setup struct {
	cfg     *policy.Config
	limits  policy.Limits
	conns   map[string]hypervisor.Connector
	storage map[string]hypervisor.StorageSnapshotter
}

// Reload is a new configuration for an engine that runs on.
type Reload struct {
	Config *policy.Config
	// Connectors and StorageSnapshotters replace the engine's; those of
	// connections that did not change should be the same values, so
	// that jobs old and new share them.
	Connectors          map[string]hypervisor.Connector
	StorageSnapshotters map[string]hypervisor.StorageSnapshotter
}

// Reload makes jobs started from now on run with r (the server calls it
// when the configuration in effect changes). Jobs in progress go on with
// what they started with, except that the engine-wide limits on VM tasks
// and on the I/O rate take their new values for everyone: more slots
// start queued VMs at once, fewer let running ones finish first.
// Repositories the engine opened whose definition changed (location,
// password file) are opened again by the next job that needs them; the
// old handles are closed with the engine.
func (e *Engine) Reload(r Reload) {
	if r.Config == nil {
		r.Config = &policy.Config{}
	}
	limits := r.Config.Limits.WithDefaults()
	old := e.cur.Swap(&setup{cfg: r.Config, limits: limits, conns: r.Connectors, storage: r.StorageSnapshotters})
	e.disp.setCapacity(e.disp.global, limits.Tasks)
	ratelimit.SetRate(e.total, limits.Rate)
	e.mu.Lock()
	defer e.mu.Unlock()
	for name, opened := range e.repos {
		before, _ := old.cfg.Repository(name)
		after, _ := r.Config.Repository(name)
		if before != after {
			e.retired = append(e.retired, opened)
			delete(e.repos, name)
		}
	}
}
