package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/coffer-backup/coffer/internal/engine"
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

// Some connectors mark the hypervisor with a snapshot's owner (vSphere:
// the snapshot's description names the worker registration). A worker
// killed mid-backup leaves that snapshot on the VM, and its own cleanup
// (its journals, at its next start) may never come: a worker lost for
// good. When the leader declares a worker lost, it hands the removal
// of that worker's marks to a live worker reaching each such connection
// of its reach (CleanupAfterLost): the server never opens a workers'
// connection itself (WorkerConnector).

// RemoveLostOwnersOperation removes a lost worker's snapshots on one
// connection, on a worker reaching it (RemoveLostOwners). Internal: the
// leader hands it off, no face offers it.
const RemoveLostOwnersOperation = "remove-lost-owners-snapshots"

// marksOwners are the connector kinds whose VM snapshots name their
// owner on the hypervisor, for another worker to remove.
var marksOwners = map[string]bool{"vsphere": true}

// LostOwners is the input of RemoveLostOwnersOperation: a connection, and
// the lost registrations (every epoch of Worker up to Epoch is dead).
type LostOwners struct {
	Connection string       `json:"connection"`
	Lost       []LostWorker `json:"lost"`
}

// LostWorker is a worker declared lost at its registration Epoch.
type LostWorker struct {
	Worker string `json:"worker"`
	Epoch  int64  `json:"epoch"`
}

// LostOwnersRemoved is its document: what was removed or resumed.
type LostOwnersRemoved struct {
	Removed []string `json:"removed"`
}

// ownerRemover is a connector that removes dead owners' snapshots
// (vsphere.Connector).
type ownerRemover interface {
	RemoveOwnersSnapshots(ctx context.Context, gone func(owner string) bool) ([]hypervisor.Leftover, error)
}

// RemoveLostOwners runs on a worker: on the connection, it removes the
// snapshots of the lost registrations and resumes the VMs they left
// suspended.
func RemoveLostOwners(ctx context.Context, svc *service.Service, in *LostOwners, log *slog.Logger) (*LostOwnersRemoved, error) {
	cfg, _, err := svc.PolicyConfig(ctx)
	if err != nil {
		return nil, err
	}
	conns, err := svc.OpenConnectors(ctx, cfg, []string{in.Connection})
	if err != nil {
		return nil, err
	}
	defer conns.Close()
	out := &LostOwnersRemoved{Removed: []string{}}
	r, ok := conns.Conns[in.Connection].(ownerRemover)
	if !ok {
		return out, nil // its connector marks no owner
	}
	found, err := r.RemoveOwnersSnapshots(ctx, func(owner string) bool {
		name, epoch, ok := parseOwner(owner)
		return ok && slices.ContainsFunc(in.Lost, func(l LostWorker) bool { return l.Worker == name && epoch <= l.Epoch })
	})
	for _, l := range found {
		log.Info("removed a lost worker's leftover", "connection", in.Connection, "vm", l.VM.Name, "kind", l.Kind, "name", l.Name, "action", l.Action)
		out.Removed = append(out.Removed, fmt.Sprintf("%s %s of %s: %s", l.Kind, l.Name, l.VM.Name, l.Action))
	}
	return out, err
}

// cleanupPatience bounds how long the leader tries to hand a lost
// worker's cleanup to a live worker (none may be ready at once).
const cleanupPatience = 2 * time.Minute

// CleanupAfterLost hands, for each connection of the lost workers' reach
// whose connector marks owners, the removal of their snapshots to a
// ready worker reaching it, trying again while none is ready or the
// hand-off fails, within cleanupPatience. It returns once every
// connection is done or given up on (its caller runs it apart).
func (r Remote) CleanupAfterLost(ctx context.Context, svc *service.Service, lost []Worker, log *slog.Logger) {
	cfg, _, err := svc.PolicyConfig(ctx)
	if err != nil {
		log.Warn("a lost worker's snapshots are not cleaned up: no configuration", "err", err)
		return
	}
	kind := map[string]string{}
	for _, c := range cfg.Connections {
		kind[c.Name] = c.Kind
	}
	byConn := map[string][]LostWorker{}
	for _, w := range lost {
		for _, name := range w.Reach.Connections {
			if marksOwners[kind[name]] {
				byConn[name] = append(byConn[name], LostWorker{Worker: w.Name, Epoch: w.Epoch})
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, cleanupPatience)
	defer cancel()
	for conn, ws := range byConn {
		r.cleanupOn(ctx, &LostOwners{Connection: conn, Lost: ws}, log)
	}
}

// cleanupOn hands in to a ready worker reaching its connection, again
// every second until one ran it or ctx ends.
func (r Remote) cleanupOn(ctx context.Context, in *LostOwners, log *slog.Logger) {
	for {
		worker, err := r.ChooseWorker(ctx, engine.Route{Connection: in.Connection}, true)
		if err == nil && worker != "" {
			var doc []byte
			if doc, err = r.RunOn(ctx, worker, RemoveLostOwnersOperation, in); err == nil {
				var out LostOwnersRemoved
				_ = json.Unmarshal(doc, &out)
				log.Info("a lost worker's snapshots were cleaned up", "connection", in.Connection, "by", worker, "lost", in.Lost, "removed", out.Removed)
				return
			}
		}
		select {
		case <-ctx.Done():
			log.Warn("a lost worker's snapshots were not cleaned up: they stay until a backup of their VM, or the worker's return",
				"connection", in.Connection, "lost", in.Lost, "worker", worker, "err", err)
			return
		case <-time.After(time.Second):
		}
	}
}
