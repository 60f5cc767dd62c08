package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/fleet/queue"
	"github.com/coffer-backup/coffer/internal/service"
)

// Remote is the service's way to run a request's operation on a worker
// it names (service.Remote): the operation handed to that worker's queue
// by ID with the request's input, and its outcome waited for. The server
// authorised the request; the worker runs it on its own host.
type Remote struct {
	Queue   *queue.Client
	Workers catalog.Workers
}

var _ service.Remote = Remote{}

// RunOn implements service.Remote.
func (r Remote) RunOn(ctx context.Context, worker, operation string, in any) (json.RawMessage, error) {
	epoch, err := readyEpoch(ctx, r.Workers, worker)
	if err != nil {
		return nil, err
	}
	sub, err := r.Queue.Submit(ctx, queue.Unit{Worker: worker, Epoch: epoch, Operation: operation, Input: in})
	if err != nil {
		return nil, err
	}
	wctx, stop := whileRegistered(ctx, r.Workers, worker, operation, epoch)
	defer stop()
	out, err := waitOrCancel(wctx, r.Queue, sub.ID)
	if gone := (errWorkerGone{}); errors.As(err, &gone) {
		return nil, api.WithClass(api.Internal, gone)
	}
	if err != nil {
		return nil, err
	}
	return out.Document, classed(out)
}

// waitOrCancel waits for the outcome of hand-off id. A caller that gives
// up (a cancel, a closed connection: ctx ends) cancels the hand-off, so
// that the operation it started ends too.
func waitOrCancel(ctx context.Context, q *queue.Client, id int64) (*queue.Outcome, error) {
	out, err := q.Wait(ctx, id)
	if err != nil && ctx.Err() != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelGrace)
		defer cancel()
		_ = q.Cancel(cctx, id)
		return nil, context.Cause(ctx)
	}
	return out, err
}

// readyEpoch is the registration of a ready worker: a draining one takes
// no new work, and a lost or unknown one none at all.
func readyEpoch(ctx context.Context, cat catalog.Workers, worker string) (int64, error) {
	ws, err := cat.ListWorkers(ctx)
	if err != nil {
		return 0, err
	}
	for _, w := range ws {
		if w.Name != worker {
			continue
		}
		if w.State != catalog.WorkerReady {
			return 0, api.Errorf(api.Invalid, "worker %s is %s: it takes no new work", worker, w.State)
		}
		return w.Epoch, nil
	}
	return 0, api.Errorf(api.NotFound, "no worker %s is registered", worker)
}

// classed is an outcome's error with its class, as the worker's service
// classified it, so that the face maps it as it would a local one.
func classed(out *queue.Outcome) error {
	err := out.Err()
	if err == nil {
		return nil
	}
	class := api.Class(out.ErrorClass)
	if out.Fenced || class == "" {
		class = api.Internal
	}
	return api.WithClass(class, fmt.Errorf("%s (on worker %s)", out.Error, out.Worker))
}
