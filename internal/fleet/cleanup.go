package fleet

import (
	"context"
	"errors"
	"log/slog"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/service"
)

// CleanupLeftovers removes, on the connections a worker reaches, what
// killed coffer processes left behind (a snapshot's block nodes, export,
// bitmaps and fleecing overlay, a guest left frozen or paused), as the
// engine does for its own connections when a server starts. A worker runs
// it before it registers: a unit of a host-bound connection runs only on
// that host's worker, so the retry of an attempt its killed process left
// half done finds the VM clean. A connection that cannot be cleaned is
// logged and skipped: its VMs' next backup will say what is wrong. The
// connection's storage snapshot provider removes the storage snapshots
// of a batch its killed process left (group: datastore).
func CleanupLeftovers(ctx context.Context, svc *service.Service, connections []string, log *slog.Logger) {
	if len(connections) == 0 {
		return
	}
	cfg, _, err := svc.PolicyConfig(ctx)
	if err != nil {
		log.Warn("leftovers not cleaned up: no configuration", "err", err)
		return
	}
	for _, name := range connections {
		conns, err := svc.OpenConnectors(ctx, cfg, []string{name})
		if err != nil {
			log.Warn("leftovers not cleaned up", "connection", name, "err", err)
			continue
		}
		found, err := conns.Conns[name].CleanupLeftovers(ctx)
		// A killed batch's storage snapshot (batch_worker.go): its
		// provider's journal in this worker's state directory names it.
		if sc, ok := conns.Storage[name].(hypervisor.StorageCleaner); ok {
			more, serr := sc.CleanupLeftovers(ctx)
			found, err = append(found, more...), errors.Join(err, serr)
		}
		conns.Close()
		for _, l := range found {
			log.Info("removed leftover", "connection", name, "vm", l.VM.Name, "kind", l.Kind, "name", l.Name, "action", l.Action)
		}
		if err != nil {
			log.Warn("cleaning up leftovers failed", "connection", name, "err", err)
		}
	}
}
