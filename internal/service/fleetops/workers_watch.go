package fleetops

import (
	"context"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/fleet"
)

// watchWorkers runs, while this server leads, the watch that declares lost
// the workers of the fleet that stopped renewing
// (maintenance.worker-dead-after), and returns the function that stops
// it. Each look sets the per-worker gauges of the metrics and gives the
// engine the ready workers (observed); a lost worker's running units are
// re-admitted by the dispatcher (onLost; both nil without a fleet).
func (s Ops) watchWorkers(ctx context.Context, cat catalog.Workers, deadAfter time.Duration,
	observed func([]fleet.Worker), onLost func(context.Context, []fleet.Worker)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		fleet.Watch{Catalog: cat, DeadAfter: deadAfter, Log: s.Logger(), OnLost: onLost, Observed: func(ws []fleet.Worker) {
			s.setWorkerMetrics(ws)
			if observed != nil {
				observed(ws)
			}
		}}.Run(ctx)
	}()
	return func() {
		cancel()
		wg.Wait()
		s.setWorkerMetrics(nil) // another server leads: its gauges are the current ones
	}
}

func (s Ops) setWorkerMetrics(ws []fleet.Worker) {
	if m := s.Config.Metrics; m != nil {
		m.SetWorkers(ws)
	}
}
