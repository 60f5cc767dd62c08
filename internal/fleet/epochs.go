package fleet

import (
	"context"
	"fmt"
	"sync"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// Epochs is the registry as the leader's watch last saw it (Observe, each
// look; Lost, each declaration): the registration each worker's units are
// handed off under, and checked against once a unit's point comes back,
// without a read of the catalog per unit.
//
// Freshness is not what keeps a unit correct. A unit handed off under an
// epoch that is stale by then (the worker registered again since the
// last look) is fenced by the worker (queue's fencedFor) and retried, as
// one is today when a worker re-registers while its unit waits in the
// queue. A worker's units are re-admitted elsewhere only by this
// leader's watch (OnLost), which marks the worker lost here first
// (Lost), so a point that comes back from it after that is refused as
// before (UnitRunner.stillCurrent).
type Epochs struct {
	mu sync.RWMutex
	m  map[string]epochSeen
}

type epochSeen struct {
	epoch int64
	lost  bool
}

// Observe records the registry of one look.
func (e *Epochs) Observe(ws []Worker) {
	m := make(map[string]epochSeen, len(ws))
	for _, w := range ws {
		m[w.Name] = epochSeen{epoch: w.Epoch, lost: w.State == catalog.WorkerLost}
	}
	e.mu.Lock()
	e.m = m
	e.mu.Unlock()
}

// Lost records workers just declared lost, before their units are
// re-admitted (a later registration already seen is kept).
func (e *Epochs) Lost(ws []Worker) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, w := range ws {
		if s, ok := e.m[w.Name]; ok && s.epoch <= w.Epoch {
			e.m[w.Name] = epochSeen{epoch: w.Epoch, lost: true}
		}
	}
}

// Of is a worker's registration as last seen: known is false for a
// worker the watch has not seen (the caller reads the catalog), and a
// lost worker's is an error, as EpochOf's.
func (e *Epochs) Of(worker string) (epoch int64, known bool, err error) {
	e.mu.RLock()
	s, ok := e.m[worker]
	e.mu.RUnlock()
	switch {
	case !ok:
		return 0, false, nil
	case s.lost:
		return 0, true, fmt.Errorf("fleet: worker %s is lost", worker)
	}
	return s.epoch, true, nil
}

// epochOf is the registration of a worker from what the watch saw, or,
// for one it has not seen (a unit handed off before its first look), from
// the catalog.
func (e *Epochs) epochOf(ctx context.Context, cat catalog.Workers, worker string) (int64, error) {
	if epoch, known, err := e.Of(worker); known {
		return epoch, err
	}
	return EpochOf(ctx, cat, worker)
}
