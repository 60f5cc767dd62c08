package fleet

import (
	"context"
	"log/slog"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// Watch is the server leader's side of the fleet: it declares lost the
// workers that stopped renewing and hands them to OnLost, whose units
// the dispatcher re-admits elsewhere (River's own rescue would wait for
// a job's timeout, hours for a VM).
type Watch struct {
	Catalog catalog.Workers
	// DeadAfter is how long a worker may go without renewing (0:
	// DefaultDeadAfter); Every is how often the watch looks (0: a tenth
	// of DeadAfter), so a worker is declared lost within DeadAfter+Every
	// of its last renewal.
	DeadAfter, Every time.Duration
	// OnLost receives each worker declared lost, once across all the
	// servers sharing the catalog (the hook of the dispatcher).
	OnLost func(ctx context.Context, lost []Worker)
	// Observed, when set, receives the whole registry after each look
	// (the metrics' per-worker gauges).
	Observed func(ws []Worker)
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	Log *slog.Logger // nil: slog.Default()
}

func (w Watch) deadAfter() time.Duration {
	if w.DeadAfter > 0 {
		return w.DeadAfter
	}
	return DefaultDeadAfter
}

// Check declares lost the workers silent for longer than DeadAfter, gives
// them to OnLost and returns them.
func (w Watch) Check(ctx context.Context) ([]Worker, error) {
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	lost, err := w.Catalog.DeclareWorkersLost(ctx, now().Add(-w.deadAfter()))
	if err != nil {
		return nil, err
	}
	if w.Observed != nil {
		ws, err := w.Catalog.ListWorkers(ctx)
		if err != nil {
			return lost, err
		}
		w.Observed(ws)
	}
	if len(lost) == 0 {
		return nil, nil
	}
	for _, l := range lost {
		w.log().Warn("worker lost: no heartbeat", "worker", l.Name, "epoch", l.Epoch, "last_heartbeat", l.HeartbeatAt)
	}
	if w.OnLost != nil {
		w.OnLost(ctx, lost)
	}
	return lost, nil
}

// Run checks every Every until ctx ends. A failed check is logged and
// tried again: a catalog outage fences the workers too.
func (w Watch) Run(ctx context.Context) {
	every := w.Every
	if every <= 0 {
		every = w.deadAfter() / 10
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if _, err := w.Check(ctx); err != nil && ctx.Err() == nil {
			w.log().Warn("fleet watch: cannot declare lost workers", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (w Watch) log() *slog.Logger {
	if w.Log != nil {
		return w.Log
	}
	return slog.Default()
}
