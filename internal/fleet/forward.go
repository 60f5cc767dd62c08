package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/fleet/queue"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/leader"
	"github.com/coffer-backup/coffer/internal/service"
)

// leaderSlots is how many forwarded operations the leader runs at once:
// a policy run's start is brief, a VM's backup waits in the leader's
// engine, whose limits (not this) bound what runs.
const leaderSlots = 64

// maxFenced bounds the forwards of one operation that came back fenced:
// each is a takeover under way, so a few cover any real one.
const maxFenced = 5

// Forwarder sends, from a server that does not hold the schedules lease,
// what must run in the leader's engine to the server that holds it (a
// policy run, a VM's backup started through this server's API): only the
// leader hands units to the workers, under its lease's epoch, which they
// check (LeaderFence), so a run started elsewhere would be fenced attempt
// after attempt. The operation goes by ID to queue.LeaderQueue, which only
// the lease holder works (Server.Lead), and its outcome is waited for.
// While no server holds the lease, it waits in the queue for the next
// one, which every server campaigns to be within the takeover time.
type Forwarder struct {
	Queue   *queue.Client
	Log     *slog.Logger
	leading atomic.Bool
}

// SetLeading says whether this server holds the schedules lease now: a
// leader runs the operations itself.
func (f *Forwarder) SetLeading(held bool) { f.leading.Store(held) }

// ToLeader runs operation with its input in on the leader, when this
// server is not it, and returns the leader's document (forwarded); the
// caller runs the operation itself when forwarded is false. A job the
// leader took after it lost the lease comes back fenced: it goes again,
// to the next leader. The caller giving up cancels it.
func (f *Forwarder) ToLeader(ctx context.Context, operation string, in any) (doc json.RawMessage, forwarded bool, err error) {
	if f == nil || f.leading.Load() {
		return nil, false, nil
	}
	user, _ := job.UserFrom(ctx)
	for fenced := 0; ; fenced++ {
		if fenced == maxFenced {
			return nil, true, api.Errorf(api.Locked, "%s was forwarded %d times to a server that no longer held the schedules lease: try again", operation, fenced)
		}
		sub, err := f.Queue.Forward(ctx, operation, in, user)
		if err != nil {
			return nil, true, err
		}
		f.Log.Info("forwarded to the server holding the schedules lease", "operation", operation, "hand_off", sub.ID)
		out, err := waitOrCancel(ctx, f.Queue, sub.ID)
		if err != nil {
			return nil, true, err
		}
		if out.Fenced {
			f.Log.Info("the server that took the forwarded operation no longer led: forwarded again", "operation", operation, "why", out.Error)
			continue
		}
		if out.ErrorClass == "" && out.Error == "" {
			return out.Document, true, nil
		}
		return out.Document, true, api.WithClass(api.Class(out.ErrorClass), errors.New(out.Error))
	}
}

// ForwardingRemote is the Remote of a fleet's server: operations on a
// named worker (Remote) and forwarding to the leader (Forwarder).
type ForwardingRemote struct {
	Remote
	*Forwarder
}

// Lead works queue.LeaderQueue while this server, holder, holds the
// schedules lease of leases: it runs the operations the other servers
// forward (through svc, in this server's engine). Each job is checked
// against the lease first, so that one taken between the lease's loss and
// stop goes back to the forwarder (fenced) to be forwarded again. stop
// gives running ones a moment, then cancels them.
func (s *Server) Lead(ctx context.Context, svc *service.Service, leases catalog.Leases, holder string, log *slog.Logger) (stop func(), err error) {
	c, err := queue.NewLeader(s.pool, queue.Config{Service: svc, Slots: leaderSlots, Logger: log, Fence: LeaseFence(leases, holder)})
	if err == nil {
		// Not ctx: its end (the lease lost) stops the client through stop.
		err = c.Start(context.WithoutCancel(ctx))
	}
	if err != nil {
		return nil, err
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelGrace)
		defer cancel()
		if err := c.Stop(sctx); err != nil {
			log.Warn("stopping the leader's queue", "err", err)
		}
	}, nil
}

// LeaseFence refuses a job unless holder holds the schedules lease now.
func LeaseFence(leases catalog.Leases, holder string) queue.FenceFunc {
	return func(ctx context.Context, _ string, _ int64) error {
		l, err := leases.GetLease(ctx, leader.Schedules)
		if err != nil {
			return fmt.Errorf("the schedules lease cannot be read: %w", err)
		}
		if l.Holder != holder || !time.Now().Before(l.ExpiresAt) {
			return fmt.Errorf("this server no longer holds the schedules lease (%s does, epoch %d)", l.Holder, l.Epoch)
		}
		return nil
	}
}
