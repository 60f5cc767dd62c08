package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
)

// ChooseWorker chooses the worker that runs a request's work that names
// none (a restore, a copy to tape): a ready worker whose reach covers rt
// (its connection and hosts, or its library), the least busy of them.
//
// Where none fits, it says whether the work may run in this process:
// with optional (a restore to a path, which any host can write) it
// returns "" and no error; otherwise it returns "" and no error only when
// no registered worker, other than a lost one, reaches rt's connection or
// library (the server's own), and an error naming why ("no ready worker
// reaches host kvm7") when some does: the target is the workers', and a
// server never opens it.
func (r Remote) ChooseWorker(ctx context.Context, rt engine.Route, optional bool) (string, error) {
	ws, err := r.Workers.ListWorkers(ctx)
	if err != nil {
		return "", fmt.Errorf("choosing a worker: %w", err)
	}
	var fit []catalog.Worker
	for _, w := range ws {
		if w.State == catalog.WorkerReady && covers(w.Reach, rt) {
			fit = append(fit, w)
		}
	}
	if len(fit) > 0 {
		return r.leastBusy(ctx, fit), nil
	}
	if optional || len(owners(ws, rt)) == 0 {
		return "", nil
	}
	return "", api.Errorf(api.Invalid, "%s: %s is reached by workers (%s), and only they open it: this server does not",
		unreached(ws, rt), target(rt), workerNames(owners(ws, rt)))
}

// covers reports whether a worker of reach r can run work of route rt.
// A route to a library or a boot names no connection, which
// engine.Reach.Covers would require.
func covers(r catalog.WorkerReach, rt engine.Route) bool {
	switch {
	case rt.Library != "" && !slices.Contains(r.Libraries, rt.Library),
		rt.Boot && !r.CanBoot,
		rt.Repository != "" && len(r.Repositories) > 0 && !slices.Contains(r.Repositories, rt.Repository):
		return false
	case rt.Connection == "":
		return true
	}
	rt.Library, rt.Boot = "", false
	return engineReach(r).Covers(rt)
}

// owners are the registered workers of ws, not lost, that reach rt's
// library or connection: its owners, whose target the server never
// opens.
func owners(ws []catalog.Worker, rt engine.Route) []catalog.Worker {
	if rt.Library != "" {
		var out []catalog.Worker
		for _, w := range ws {
			if w.State != catalog.WorkerLost && slices.Contains(w.Reach.Libraries, rt.Library) {
				out = append(out, w)
			}
		}
		return out
	}
	return reaching(ws, rt.Connection)
}

// unreached says why no ready worker of ws runs work of route rt.
func unreached(ws []catalog.Worker, rt engine.Route) string {
	if rt.Library != "" {
		return "no ready worker reaches library " + rt.Library
	}
	rt.Repository = "" // a restore reads it; the route's target is the host
	why := engine.Unreached(EngineWorkers(ws), rt)
	if why == "" || why == "no live worker" {
		return "no ready worker reaches connection " + rt.Connection
	}
	return strings.Replace(why, "no worker", "no ready worker", 1)
}

// target names what rt goes to.
func target(rt engine.Route) string {
	if rt.Library != "" {
		return "library " + rt.Library
	}
	return "connection " + rt.Connection
}

// leastBusy is the worker of ws with the fewest unfinished jobs in its
// queue per slot, the one renewed last among equals. Without a count
// (the queue unreadable) it is the one renewed last: a choice, not a
// failure.
func (r Remote) leastBusy(ctx context.Context, ws []catalog.Worker) string {
	names := make([]string, len(ws))
	for i, w := range ws {
		names[i] = w.Name
	}
	load := map[string]int{}
	if r.Queue != nil {
		if l, err := r.Queue.Load(ctx, names); err == nil {
			load = l
		}
	}
	busy := func(w catalog.Worker) float64 { return float64(load[w.Name]) / float64(max(w.Slots, 1)) }
	best := slices.MinFunc(ws, func(a, b catalog.Worker) int {
		if d := busy(a) - busy(b); d != 0 {
			if d < 0 {
				return -1
			}
			return 1
		}
		return b.HeartbeatAt.Compare(a.HeartbeatAt)
	})
	return best.Name
}

// engineReach is a registered reach as the engine routes by it.
func engineReach(r catalog.WorkerReach) engine.Reach {
	return engine.Reach{Connections: r.Connections, Hosts: r.Hosts, Datastores: r.Datastores, Libraries: r.Libraries,
		Repositories: r.Repositories, CanBoot: r.CanBoot}
}
