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
// them to OnLost, then the registry to Observed, and returns them. It
// reads the registry first and writes only when a worker is overdue, so
// that a look at a healthy fleet (or a SQLite catalog without workers)
// costs one read. OnLost comes before anything that could fail: a worker
// is declared lost once, and its units are re-admitted from that one
// call (a leader that dies in between leaves them to its successor, who
// rebuilds from the catalog).
func (w Watch) Check(ctx context.Context) ([]Worker, error) {
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	cutoff := now().Add(-w.deadAfter())
	ws, err := w.Catalog.ListWorkers(ctx)
	if err != nil {
		return nil, err
	}
	var lost []Worker
	if overdue(ws, cutoff) {
		if lost, err = w.Catalog.DeclareWorkersLost(ctx, cutoff); err != nil {
			return nil, err
		}
		for _, l := range lost {
			w.log().Warn("worker lost: no heartbeat", "worker", l.Name, "epoch", l.Epoch, "last_heartbeat", l.HeartbeatAt)
		}
		if w.OnLost != nil && len(lost) > 0 {
			w.OnLost(ctx, lost)
		}
		// Read again: another server may have declared them first.
		if ws, err = w.Catalog.ListWorkers(ctx); err != nil {
			return lost, err
		}
	}
	if w.Observed != nil {
		w.Observed(ws)
	}
	return lost, nil
}

// overdue reports a worker not yet lost whose heartbeat is older than
// cutoff.
func overdue(ws []Worker, cutoff time.Time) bool {
	for _, x := range ws {
		if x.State != catalog.WorkerLost && x.HeartbeatAt.Before(cutoff) {
			return true
		}
	}
	return false
}

func (w Watch) log() *slog.Logger {
	if w.Log != nil {
		return w.Log
	}
	return slog.Default()
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
