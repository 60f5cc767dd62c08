package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// lostLook is how often a server waiting for an operation it handed to a
// worker by ID looks whether that worker is still the registration it
// handed it to. A worker killed mid-operation leaves its River job
// running for ever (design/fleet.md, "A worker killed mid-operation"):
// nothing else would end the wait, and nobody retries an operation run
// by ID, so the caller must hear that it is lost.
const lostLook = 500 * time.Millisecond

// errWorkerGone ends the wait for a hand-off whose worker was declared
// lost or replaced by a new registration.
type errWorkerGone struct {
	worker    string
	operation string
	epoch     int64
	now       catalog.Worker
}

func (e errWorkerGone) Error() string {
	if e.now.Epoch == 0 {
		return fmt.Sprintf("worker %s left the registry while it ran %s: its outcome is unknown; run it again", e.worker, e.operation)
	}
	if e.now.Epoch != e.epoch {
		return fmt.Sprintf("worker %s was replaced (registration %d, now %d) while it ran %s: its outcome is unknown; run it again",
			e.worker, e.epoch, e.now.Epoch, e.operation)
	}
	return fmt.Sprintf("worker %s was lost while it ran %s: its outcome is unknown; run it again", e.worker, e.operation)
}

// whileRegistered is ctx, ended with errWorkerGone as its cause once the
// registry says registration epoch of worker is lost or replaced; stop
// ends the watch.
func whileRegistered(ctx context.Context, cat catalog.Workers, worker, operation string, epoch int64) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		tick := time.NewTicker(lostLook)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if w, gone := registrationGone(ctx, cat, worker, epoch); gone {
				cancel(errWorkerGone{worker: worker, operation: operation, epoch: epoch, now: w})
				return
			}
		}
	}()
	return ctx, func() { cancel(nil) }
}

// registrationGone says whether the registry no longer holds registration
// epoch of worker as alive. A failed look says nothing: the next one may.
func registrationGone(ctx context.Context, cat catalog.Workers, worker string, epoch int64) (catalog.Worker, bool) {
	ws, err := cat.ListWorkers(ctx)
	if err != nil {
		return catalog.Worker{}, false
	}
	for _, w := range ws {
		if w.Name == worker {
			return w, w.Epoch != epoch || w.State == catalog.WorkerLost
		}
	}
	return catalog.Worker{Name: worker}, true // unregistered
}
