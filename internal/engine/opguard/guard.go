// Package opguard bounds a unit's hypervisor operations by its policy's
// per-operation timeouts, for the engine's tasks and a worker's VM units
// (internal/fleet) alike.
package opguard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
)

// Guard decorates a connector for one unit: it bounds snapshot create and
// remove by the policy's timeouts even when a connector ignores
// cancellation (the call is abandoned, and whatever it eventually returns
// is closed in the background), and it reports how long each operation
// took, for the unit's events.
type Guard struct {
	hypervisor.Connector
	Create, Remove time.Duration // 0: bounded only by the caller's context
	Note           func(kind string, took time.Duration, err error)
	Background     func(func()) // runs abandoned-call cleanup, tracked by its process
	// Watch, when set, hands each session to the latency watch, until
	// the function it returns (called before the session closes).
	Watch func(hypervisor.Session) func()
}

// New guards c by the policy's timeouts: a snapshot's create is bounded
// by its create and quiesce timeouts together (the quiesce is part of
// it), its release and remove by the remove timeout.
func New(c hypervisor.Connector, to policy.Timeouts, note func(kind string, took time.Duration, err error), background func(func())) *Guard {
	create := to.SnapshotCreate
	if create > 0 {
		create += to.Quiesce
	}
	return &Guard{Connector: c, Create: create, Remove: to.SnapshotRemove, Note: note, Background: background}
}

// ErrTimeout marks a hypervisor operation that exceeded its timeout; it
// also wraps hypervisor.ErrTransient, so the unit is retried.
var ErrTimeout = errors.New("hypervisor operation timed out")

// call runs op bounded by limit, abandoning it (and handing its eventual
// result to abandon) if it does not return in time.
func call[T any](ctx context.Context, limit time.Duration, what string, bg func(func()), op func(context.Context) (T, error), abandon func(T)) (T, error) {
	var zero T
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if limit > 0 {
		cctx, cancel = context.WithTimeout(ctx, limit)
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := op(cctx)
		ch <- result{v, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-cctx.Done():
		select {
		case r = <-ch: // it did return in time after all
		default:
			bg(func() {
				r := <-ch
				cancel()
				if r.err == nil {
					abandon(r.v)
				}
			})
			return zero, timeoutError(ctx, cctx, what, limit)
		}
	}
	cancel()
	if r.err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		return r.v, fmt.Errorf("%w: %w", timeoutError(ctx, cctx, what, limit), r.err)
	}
	return r.v, r.err
}

func timeoutError(parent, cctx context.Context, what string, limit time.Duration) error {
	if err := parent.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, context.Cause(parent))
	}
	return fmt.Errorf("%s: %w after %s (%w)", what, ErrTimeout, limit, hypervisor.ErrTransient)
}

func (g *Guard) Snapshot(ctx context.Context, vm hypervisor.VMRef, req hypervisor.SnapshotRequest) (hypervisor.Session, error) {
	start := time.Now()
	s, err := call(ctx, g.Create, "snapshot create", g.Background,
		func(c context.Context) (hypervisor.Session, error) { return g.Connector.Snapshot(c, vm, req) },
		func(s hypervisor.Session) {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.removeLimit())
			defer cancel()
			_, err := s.Close(cctx, false)
			g.Note("abandoned-snapshot-closed", time.Since(start), err)
		})
	g.Note("snapshot-create", time.Since(start), err)
	if err != nil {
		return nil, err
	}
	gs := &guardSession{Session: s, g: g, unwatch: func() {}}
	if g.Watch != nil {
		gs.unwatch = g.Watch(s)
	}
	return gs, nil
}

func (g *Guard) removeLimit() time.Duration {
	if g.Remove > 0 {
		return g.Remove
	}
	return backup.CloseTimeout
}

type guardSession struct {
	hypervisor.Session
	g       *Guard
	unwatch func()
}

// Notes implements hypervisor.Noter for the sessions that have it, so the
// task log still says how the disks are read.
func (s *guardSession) Notes() []string {
	if n, ok := s.Session.(hypervisor.Noter); ok {
		return n.Notes()
	}
	return nil
}

func (s *guardSession) Release(ctx context.Context) error {
	start := time.Now()
	_, err := call(ctx, s.g.Remove, "snapshot release", s.g.Background,
		func(c context.Context) (struct{}, error) { return struct{}{}, s.Session.Release(c) }, func(struct{}) {})
	s.g.Note("snapshot-release", time.Since(start), err)
	return err
}

func (s *guardSession) Close(ctx context.Context, ok bool) (map[string]string, error) {
	s.unwatch() // its monitor goes with it
	start := time.Now()
	tokens, err := call(ctx, s.g.Remove, "snapshot remove", s.g.Background,
		func(c context.Context) (map[string]string, error) { return s.Session.Close(c, ok) }, func(map[string]string) {})
	s.g.Note("snapshot-remove", time.Since(start), err)
	return tokens, err
}

// GuestRun implements backup.GuestRunner for the connectors that have it,
// so that hooks reach the guest agent through the guard.
func (g *Guard) GuestRun(ctx context.Context, vm hypervisor.VMRef, argv []string) (string, error) {
	gr, ok := g.Connector.(backup.GuestRunner)
	if !ok {
		return "", fmt.Errorf("%w: a %s connection cannot run commands in guests", hypervisor.ErrUnsupported, g.Kind())
	}
	return gr.GuestRun(ctx, vm, argv)
}
