package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Component is a part of the running server (the HTTP listener, the
// background work of requests, the schedules, periodic pruning; metrics
// and notifications join the list the same way). Run starts components
// in order and drains them in reverse.
type Component struct {
	Name string
	// Start starts the component, which runs in the background until
	// drained; done, when not nil, reports that it ended by itself (a
	// failure that stops the server).
	Start func(ctx context.Context) (done <-chan error, err error)
	// Drain stops the component: it refuses new work, lets running work
	// finish until ctx ends, then cancels it, and returns once everything
	// has stopped (cancelled work records itself as cancelled).
	Drain func(ctx context.Context) error
}

// Run starts the components and serves until ctx ends (SIGTERM) or one
// of them fails; then it drains them, newest first, all within one
// deadline of drainTimeout.
func Run(ctx context.Context, log *slog.Logger, drainTimeout time.Duration, components []Component) error {
	var started []Component
	failed := make(chan error, len(components))
	var runErr error
	for _, c := range components {
		done, err := c.Start(ctx)
		if err != nil {
			runErr = fmt.Errorf("start %s: %w", c.Name, err)
			break
		}
		started = append(started, c)
		if done != nil {
			go func(name string) {
				if err := <-done; err != nil {
					failed <- fmt.Errorf("%s: %w", name, err)
				} else {
					failed <- fmt.Errorf("%s stopped", name)
				}
			}(c.Name)
		}
	}
	if runErr == nil {
		log.Info("coffer server started", "components", len(started))
		select {
		case <-ctx.Done():
			log.Info("coffer server stopping: draining", "timeout_seconds", drainTimeout.Seconds())
		case runErr = <-failed:
			log.Error("coffer server stopping", "err", runErr)
		}
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drainTimeout)
	defer cancel()
	var errs []error
	for i := len(started) - 1; i >= 0; i-- {
		if err := started[i].Drain(dctx); err != nil {
			errs = append(errs, fmt.Errorf("drain %s: %w", started[i].Name, err))
		}
	}
	log.Info("coffer server stopped")
	return errors.Join(append([]error{runErr}, errs...)...)
}
