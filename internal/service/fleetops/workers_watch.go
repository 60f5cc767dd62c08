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
// it. The dispatcher's re-admission of a lost worker's units hooks into
// fleet.Watch.OnLost once workers run units; until then the watch's log
// line and the registry's state say it. Each look also sets the
// per-worker gauges of the metrics.
func (s Ops) watchWorkers(ctx context.Context, cat catalog.Workers, deadAfter time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		fleet.Watch{Catalog: cat, DeadAfter: deadAfter, Log: s.Logger(), Observed: s.setWorkerMetrics}.Run(ctx)
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
