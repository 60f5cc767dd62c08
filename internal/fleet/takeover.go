package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/fleet/queue"
	"github.com/coffer-backup/coffer/internal/leader"
	"github.com/coffer-backup/coffer/internal/service"
)

// Holder is the engine's side of a takeover: a unit granted by a previous
// leader occupies its pools until released (engine.Engine.Hold).
type Holder interface {
	Hold(h engine.Held) (release func())
}

// Grants are the VM units granted before this server took the schedules
// over (by the previous leader, or by this one in an earlier holding of
// the lease), rebuilt from their River jobs: each is held in the engine
// until its job finishes, or its worker is declared lost or registers
// again (its unit will not run: the worker's fence refuses it). So the
// new leader never grants a worker's slot, a host's or any other pool's
// past its limit while the old leader's units still run, and it never
// backs a VM up twice at once.
type Grants struct {
	log    *slog.Logger
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	held   map[int64]heldGrant // by River job ID
}

type heldGrant struct {
	unit    queue.VMUnit
	release func()
}

// HoldGrants holds in eng every VM unit not finished, and releases each
// as its job finishes (one Wait each, woken by the worker's completion).
// Release ends them all.
func HoldGrants(ctx context.Context, q *queue.Client, eng Holder, log *slog.Logger) (*Grants, error) {
	units, err := q.UnfinishedVMUnits(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	g := &Grants{log: log, cancel: cancel, held: map[int64]heldGrant{}}
	for _, gu := range units {
		u := gu.Unit
		g.held[gu.ID] = heldGrant{unit: u, release: eng.Hold(engine.Held{Pools: u.Pools, Connection: u.Connection, VMID: u.VMID})}
		log.Info("a unit granted before the takeover holds its slots until it ends", "job", u.Job, "task", u.Task, "attempt", u.Attempt,
			"vm", u.VMName, "worker", u.Worker, "leader_epoch", u.LeaderEpoch, "pools", u.Pools)
	}
	for id := range g.held {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			if _, err := q.Wait(ctx, id); ctx.Err() == nil {
				why := "its job ended"
				if err != nil {
					why = err.Error() // gone from River's table: it runs no more
				}
				g.release(id, why)
			}
		}()
	}
	return g, nil
}

// Len is the number of grants still held.
func (g *Grants) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.held)
}

func (g *Grants) release(id int64, why string) {
	g.mu.Lock()
	h, ok := g.held[id]
	delete(g.held, id)
	g.mu.Unlock()
	if ok {
		h.release()
		g.log.Info("a unit granted before the takeover released its slots", "job", h.unit.Job, "task", h.unit.Task,
			"vm", h.unit.VMName, "worker", h.unit.Worker, "because", why)
	}
}

// Observe releases the grants whose worker the registry ws no longer
// holds at the grant's epoch (lost, registered again, gone): such a
// unit's process is dead or fenced, and its River job may stay running
// until River's rescuer, an hour later.
func (g *Grants) Observe(ws []Worker) {
	live := map[string]int64{}
	for _, w := range ws {
		if w.State != catalog.WorkerLost {
			live[w.Name] = w.Epoch
		}
	}
	g.mu.Lock()
	var gone []int64
	for id, h := range g.held {
		if live[h.unit.Worker] != h.unit.Epoch {
			gone = append(gone, id)
		}
	}
	g.mu.Unlock()
	for _, id := range gone {
		g.release(id, "its worker is lost or registered again")
	}
}

// Release releases every grant still held and stops waiting (this server
// no longer leads).
func (g *Grants) Release() {
	g.cancel()
	g.wg.Wait()
	g.mu.Lock()
	ids := make([]int64, 0, len(g.held))
	for id := range g.held {
		ids = append(ids, id)
	}
	g.mu.Unlock()
	for _, id := range ids {
		g.release(id, "this server no longer leads")
	}
}

// LeaderFence is a worker's queue.LeaderFenceFunc: a unit granted under
// an epoch of the schedules lease other than the lease's own now was
// granted by a leader that has been replaced (one that froze past its
// lease and woke), and must not run.
func LeaderFence(svc *service.Service) queue.LeaderFenceFunc {
	return func(ctx context.Context, epoch int64) error {
		cat, err := svc.OpenCatalog(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = cat.Close() }()
		l, err := cat.GetLease(ctx, leader.Schedules)
		if err != nil {
			return fmt.Errorf("fleet: the schedules lease cannot be read: %w", err)
		}
		if l.Epoch != epoch {
			return fmt.Errorf("fleet: a unit granted under epoch %d of the schedules lease, which is at epoch %d (held by %q): %w",
				epoch, l.Epoch, l.Holder, catalog.ErrFenced)
		}
		return nil
	}
}
