// Package route is what the dispatcher routes and counts a unit by: the
// workers' reach, each unit's route (which worker may run it), and the
// limits' pools it takes a slot of (SlotNeeds). The engine places units
// with it and internal/plan simulates with it.
package route

import (
	"cmp"
	"slices"
	"strings"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
)

// Worker is a data mover the dispatcher can place units on (issue 36:
// `coffer worker` on a hypervisor host or a proxy). Each worker is one
// more pool, "worker:<Name>", of Slots slots: the leader's dispatcher
// holds every limit, the workers' included, so the limits of shared
// storage hold across the fleet by construction.
type Worker struct {
	Name  string
	Slots int // concurrent units (default one per core, decided by the worker)
	Reach Reach
}

// Reach is what a worker can get at. A unit runs only on a worker whose
// reach covers its Route.
type Reach struct {
	// Connections the worker serves (by connection name).
	Connections []string
	// Hosts it runs on or reaches, "conn/host": a QEMU or libvirt VM can
	// be read only on its own host (QMP and libvirt's NBD exports are
	// Unix sockets there).
	Hosts []string
	// Datastores it mounts, "conn/ds": where a group: datastore batch
	// reads its storage snapshot.
	Datastores []string
	// Libraries (tape) attached to it.
	Libraries []string
	// Repositories it can write; empty: every repository (an S3 one is
	// reachable from anywhere, a local path only from its host). The
	// default repository is "default".
	Repositories []string
	// CanBoot: it can run QEMU, for boot verification.
	CanBoot bool
}

// Route is what a unit needs of the worker that runs it.
type Route struct {
	Connection string
	// Hosts the unit must be run beside (hard affinity), host names of
	// Connection; empty for connections any worker listing them serves.
	Hosts []string
	// Datastore, when set, must be mounted (a batch's storage snapshot).
	Datastore string
	// Repository is the repository written ("default" for the default).
	Repository string
	Library    string
	Boot       bool
	// Workers, when set, are the only workers that may run the unit (by
	// name): its policy's affinity, as Veeam restricts a job to chosen
	// proxies (a site's, a repository's). Empty: any worker whose reach
	// covers the rest.
	Workers []string
}

// hostBound are the connection kinds whose VMs can be read only on their
// own host; fake-kvm is a simulated KVM estate that only test binaries
// register (servicetest), so that host-bound routing is tested at scale.
var hostBound = map[string]bool{"qemu": true, "libvirt": true, "fake-kvm": true}

// RouteOf is the route of a VM of policy p on connection conn: its host
// when the connection's kind (from the configuration) reads VMs only on
// their host, and the policy's repository. The engine routes with it and
// internal/plan simulates with it, as with SlotNeeds.
func RouteOf(cfg *policy.Config, p policy.Policy, conn string, vm hypervisor.VM) Route {
	rt := Route{Connection: conn, Repository: cmp.Or(p.Repository, "default"), Workers: p.Workers}
	if hostBound[connectionKind(cfg, conn)] {
		rt.Hosts = []string{vm.Host}
	}
	return rt
}

func connectionKind(cfg *policy.Config, name string) string {
	for _, c := range cfg.Connections {
		if c.Name == name {
			return c.Kind
		}
	}
	return ""
}

// Covers reports whether worker w may run a unit of route rt: the route
// allows it (its policy's workers) and its reach covers the route.
func (w Worker) Covers(rt Route) bool {
	return w.allowed(rt) && w.Reach.Covers(rt)
}

// allowed reports whether the route's affinity, if any, names w.
func (w Worker) allowed(rt Route) bool {
	return len(rt.Workers) == 0 || slices.Contains(rt.Workers, w.Name)
}

// Covers reports whether a worker of this reach can run a unit of route
// rt, whichever workers the route allows (Worker.Covers checks both).
func (r Reach) Covers(rt Route) bool {
	return r.why(rt) == ""
}

// why is the first thing of rt the reach lacks, "" when it has all.
func (r Reach) why(rt Route) string {
	if !slices.Contains(r.Connections, rt.Connection) {
		return "connection " + rt.Connection
	}
	for _, h := range rt.Hosts {
		if !slices.Contains(r.Hosts, rt.Connection+"/"+h) {
			return "host " + h
		}
	}
	if rt.Datastore != "" && !slices.Contains(r.Datastores, rt.Connection+"/"+rt.Datastore) {
		return "datastore " + rt.Datastore
	}
	if rt.Repository != "" && len(r.Repositories) > 0 && !slices.Contains(r.Repositories, rt.Repository) {
		return "repository " + rt.Repository
	}
	if rt.Library != "" && !slices.Contains(r.Libraries, rt.Library) {
		return "library " + rt.Library
	}
	if rt.Boot && !r.CanBoot {
		return "boot verification"
	}
	return ""
}

// Unreached says why no worker of ws can run a unit of route rt ("no
// worker reaches host kvm7"), or "" when one can. Of the workers, the
// requirement that rules out the last of them is named, so the message
// names what is missing, not what every worker lacks first.
func Unreached(ws []Worker, rt Route) string {
	if len(ws) == 0 {
		return "no live worker"
	}
	if len(rt.Workers) > 0 {
		var allowed []Worker
		for _, w := range ws {
			if w.allowed(rt) {
				allowed = append(allowed, w)
			}
		}
		of := "no live worker of the policy's workers (" + strings.Join(rt.Workers, ", ") + ")"
		if len(allowed) == 0 {
			return of
		}
		if why := lacking(allowed, rt); why != "" {
			return of + " reaches " + why
		}
		return ""
	}
	if why := lacking(ws, rt); why != "" {
		return "no worker reaches " + why
	}
	return ""
}

// lacking is what of rt none of ws reaches ("host kvm7"), "" when one
// reaches it all.
func lacking(ws []Worker, rt Route) string {
	// Narrow the workers requirement by requirement, in Reach.why's order.
	steps := []Route{{Connection: rt.Connection}, {Connection: rt.Connection, Hosts: rt.Hosts},
		{Connection: rt.Connection, Hosts: rt.Hosts, Datastore: rt.Datastore}, rt}
	left := ws
	for _, step := range steps {
		var next []Worker
		var why string
		for _, w := range left {
			if y := w.Reach.why(step); y == "" {
				next = append(next, w)
			} else if why == "" {
				why = y
			}
		}
		if len(next) == 0 {
			return why
		}
		left = next
	}
	return ""
}
