package fleetops

import (
	"context"
	"errors"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
)

// watchSchema reads the catalog's schema every period, without opening
// it, until ctx ends or it finds one a newer coffer migrated (a rolling
// upgrade, docs/upgrading.md): then it marks the service superseded (the
// API refuses new work with the class unsupported-version) and calls
// stepDown, which gives the schedules' lease up at once. It returns a
// function that stops it.
func (s Ops) watchSchema(ctx context.Context, period time.Duration, stepDown func()) (stop func()) {
	if period <= 0 {
		period = 10 * time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(period):
			}
			sc, err := catalogopen.ReadSchema(ctx, s.CatalogAddress())
			switch {
			case errors.Is(err, catalog.ErrNewerSchema):
				s.Supersede(sc.Applied, sc.Known)
				s.Logger().Error("a newer coffer migrated the catalog: this server takes no new work and gives the schedules up; "+
					"upgrade it (docs/upgrading.md)", "schema", sc.Applied, "known", sc.Known)
				stepDown()
				return
			case err != nil && ctx.Err() == nil:
				s.Logger().Debug("reading the catalog's schema failed", "err", err)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// ctxDoneOnceIdle is ctx's end once the schedules no longer run (done is
// nil: superseded) and the configuration is no longer watched (states
// is nil); otherwise nil, which the server's loop never selects.
func ctxDoneOnceIdle[S any](ctx context.Context, done <-chan error, states <-chan S) <-chan struct{} {
	if done == nil && states == nil {
		return ctx.Done()
	}
	return nil
}
