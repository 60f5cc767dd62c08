package engine

import (
	"fmt"
	"slices"

	"github.com/coffer-backup/coffer/internal/engine/route"
)

// The workers and what they reach are internal/engine/route's, beside
// the engine so that the planner and the fleet share them.
type (
	Worker = route.Worker
	Reach  = route.Reach
	Route  = route.Route
)

// RouteOf and Unreached: see internal/engine/route.
var (
	RouteOf   = route.RouteOf
	Unreached = route.Unreached
)

// The pools a unit needs are internal/engine/route's too (SlotNeeds).
type SlotNeed = route.SlotNeed

// GlobalPool: see internal/engine/route.
const GlobalPool = route.GlobalPool

// SlotNeeds and RepositoryStreams: see internal/engine/route.
var (
	SlotNeeds         = route.SlotNeeds
	RepositoryStreams = route.RepositoryStreams
)

// route is what a VM's unit needs of its worker.
func (t *task) route() *Route {
	rt := RouteOf(t.j.s.cfg, t.j.p, t.rec.Connection, t.vm)
	if t.held != nil {
		// The read comes from the batch's storage snapshot, on the
		// datastore: a worker that mounts it, as the batch's did.
		rt.Datastore = t.vm.Datastores[0]
	}
	return &rt
}

// noteWait logs why the VM's unit cannot be placed.
func (t *task) noteWait(why string) {
	t.event("warn", "no-worker", fmt.Sprintf("%s waits: %s", t.vm.Name, why), map[string]any{"reason": why})
}

// batchRoute is what a batch needs of its worker: the datastore mounted,
// and each VM's host where the connection reads VMs on their host only.
// The batch is one unit, so all of it runs on one worker.
func (j *Job) batchRoute(batch []*task) *Route {
	rt := RouteOf(j.s.cfg, j.p, batch[0].rec.Connection, batch[0].vm)
	rt.Datastore = batch[0].vm.Datastores[0]
	if len(rt.Hosts) > 0 {
		rt.Hosts = nil
		for _, t := range batch {
			if !slices.Contains(rt.Hosts, t.vm.Host) {
				rt.Hosts = append(rt.Hosts, t.vm.Host)
			}
		}
	}
	return &rt
}

// workerKey is the pool of a worker's slots.
func workerKey(name string) string { return "worker:" + name }
