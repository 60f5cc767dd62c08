package fleet

import (
	"cmp"
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
//
// A forwarded operation outlives the leader that took it: that leader
// records the lease's epoch on the job as it starts it (queue.Config.Lease),
// and while the forwarder waits it looks, every Every, whether another
// server now holds the lease under another epoch. Then the leader that
// took it died or froze past its lease: the job is cancelled (a frozen
// one that wakes stops it; a dead one's row waits for River's rescuer,
// an hour, but nobody waits for it) and forwarded again, to the new
// leader, or run here if this server is it. Whatever the old leader
// still hands off under its epoch, the workers refuse (LeaderFence).
type Forwarder struct {
	Queue *queue.Client
	// Leases is the catalog's, where the schedules lease is read.
	Leases catalog.Leases
	// Every is how often a wait looks at the lease (0: a second).
	Every   time.Duration
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
//
// An operation forwarded again after the leader that took it was lost
// carries on the catalog jobs that leader (and any lost before it) ran it
// as, oldest first: sent with it (queue.Args.Resumes), or, when this
// server runs it itself, returned as resumes (job.WithResumes), so that
// its job settles theirs before it backs anything up.
func (f *Forwarder) ToLeader(ctx context.Context, operation string, in any) (doc json.RawMessage, forwarded bool, resumes []int64, err error) {
	if f == nil || f.leading.Load() {
		return nil, false, nil, nil
	}
	user, _ := job.UserFrom(ctx)
	for fenced := 0; ; fenced++ {
		if fenced > 0 && f.leading.Load() {
			return nil, false, resumes, nil // this server took the lease meanwhile: it runs it itself
		}
		if fenced == maxFenced {
			return nil, true, nil, api.Errorf(api.Locked, "%s was forwarded %d times to a server that no longer held the schedules lease: try again", operation, fenced)
		}
		sub, err := f.Queue.Forward(ctx, operation, in, user, resumes)
		if err != nil {
			return nil, true, nil, err
		}
		f.Log.Info("forwarded to the server holding the schedules lease", "operation", operation, "hand_off", sub.ID, "resumes", resumes)
		out, err := f.wait(ctx, sub.ID)
		if err != nil {
			return nil, true, nil, err
		}
		if out.Fenced {
			if out.Job != 0 {
				resumes = append(resumes, out.Job)
			}
			f.Log.Info("the server that took the forwarded operation no longer led: forwarded again", "operation", operation, "why", out.Error, "lost_job", out.Job)
			continue
		}
		if out.ErrorClass == "" && out.Error == "" {
			return out.Document, true, nil, nil
		}
		return out.Document, true, nil, api.WithClass(api.Class(out.ErrorClass), errors.New(out.Error))
	}
}

// errLeaderReplaced ends the wait for a forwarded operation whose leader
// no longer holds the schedules lease.
var errLeaderReplaced = errors.New("the leader that took it no longer holds the schedules lease")

// wait is waitOrCancel for a forwarded operation, which comes back fenced
// (to be forwarded again) once the leader that took it has been replaced.
func (f *Forwarder) wait(ctx context.Context, id int64) (*queue.Outcome, error) {
	if f.Leases == nil {
		return waitOrCancel(ctx, f.Queue, id)
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watched := make(chan struct{})
	var lostJob int64 // the catalog job the replaced leader ran it as
	go func() {
		defer close(watched)
		lostJob = f.watchLeader(wctx, id, cancel)
	}()
	out, err := waitOrCancel(wctx, f.Queue, id)
	cancel(nil)
	<-watched
	why := context.Cause(wctx)
	if err != nil && ctx.Err() == nil && errors.Is(why, errLeaderReplaced) {
		return &queue.Outcome{Fenced: true, Error: why.Error(), Job: lostJob}, nil
	}
	return out, err
}

// watchLeader ends the wait for forwarded job id (cancel, with
// errLeaderReplaced) once another server holds the schedules lease under
// another epoch than the one the job was taken under, and returns then
// the catalog job that leader ran it as (0: none recorded).
func (f *Forwarder) watchLeader(ctx context.Context, id int64, cancel context.CancelCauseFunc) (lostJob int64) {
	t := time.NewTicker(cmp.Or(f.Every, time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0
		case <-t.C:
		}
		epoch, catalogJob, running, err := f.Queue.TakenUnder(ctx, id)
		if err != nil || !running || epoch == 0 {
			continue // a look that fails is tried again: the wait goes on meanwhile
		}
		l, err := f.Leases.GetLease(ctx, leader.Schedules)
		if err != nil || l.Epoch == epoch || l.Holder == "" || !time.Now().Before(l.ExpiresAt) {
			continue
		}
		f.Log.Warn("the leader that took a forwarded operation was replaced: it goes to the new one", "hand_off", id,
			"taken_under", epoch, "leader_epoch", l.Epoch, "holder", l.Holder, "lost_job", catalogJob)
		cancel(fmt.Errorf("%w (it was taken under epoch %d; %s holds epoch %d)", errLeaderReplaced, epoch, l.Holder, l.Epoch))
		return catalogJob
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
	c, err := queue.NewLeader(s.pool, queue.Config{Service: svc, Slots: leaderSlots, Logger: log, Lease: leaseHeld(leases, holder)})
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

// leaseHeld is the epoch of the schedules lease while holder holds it,
// and refuses a job otherwise.
func leaseHeld(leases catalog.Leases, holder string) queue.LeaseFunc {
	return func(ctx context.Context) (int64, error) {
		l, err := leases.GetLease(ctx, leader.Schedules)
		if err != nil {
			return 0, fmt.Errorf("the schedules lease cannot be read: %w", err)
		}
		if l.Holder != holder || !time.Now().Before(l.ExpiresAt) {
			return 0, fmt.Errorf("this server no longer holds the schedules lease (%s does, epoch %d)", l.Holder, l.Epoch)
		}
		return l.Epoch, nil
	}
}
