package fleetops

import (
	"context"
	"log/slog"

	"github.com/coffer-backup/coffer/internal/engine"
)

// forwardHere makes this server, which just took the schedules lease as
// holder, run the operations the other servers forward to the leader
// (fleet.Forwarder: a policy run or a VM's backup started through their
// API), and run its own API's itself. It returns the function that ends
// it, when the lease is lost: from then on this server's own are
// forwarded too.
func (f *fleetUnits) forwardHere(ctx context.Context, holder string, log *slog.Logger) (end func()) {
	stop, err := f.srv.Lead(ctx, f.svc, f.cat, holder, log)
	if err != nil {
		// They wait in the queue for the next leader; this one's own
		// API still runs its own runs.
		log.Error("the leader's queue cannot be worked: the runs the other servers forward wait for the next leader", "err", err)
		stop = func() {}
	}
	f.fwd.SetLeading(true)
	return func() {
		f.fwd.SetLeading(false)
		stop()
	}
}

// unfollow leaves the engine without workers once this server no longer
// leads: the workers refuse a unit under its stale epoch, so a unit still
// queued in it waits (saying why) rather than be handed off to be fenced,
// and nothing new starts in it (the API's runs are forwarded).
func (f *fleetUnits) unfollow(eng *engine.Engine, log *slog.Logger) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.followed {
		return
	}
	if err := eng.SetWorkers(nil); err != nil {
		log.Warn("the engine cannot be left without workers", "err", err)
	}
	if f.names != "" {
		f.names = ""
		log.Info("the engine places units on no worker: this server no longer leads")
	}
}

// handOver interrupts, once this server stopped leading a fleet while it
// goes on (its lease lost to a partition, or to a freeze it woke from),
// the policy runs of its engine: their units left to place would wait
// for ever (unfollow), their job alive, so no leader would resume them.
// Interrupted, each is recorded as a dead server's run is, and the
// server that leads resumes its VMs without a point (resumeRuns); the
// units still running are cut, and that leader holds their slots until
// they end (fleet.HoldGrants), so no VM is granted twice at once.
func (f *fleetUnits) handOver(eng *engine.Engine, log *slog.Logger) {
	f.mu.Lock()
	followed := f.followed
	f.mu.Unlock()
	if f.srv == nil || !followed {
		return // its units run in this process: they need no leader
	}
	if ids := eng.Interrupt("this server no longer leads the fleet"); len(ids) > 0 {
		log.Warn("this server no longer leads: its policy runs are interrupted, for the leader to resume", "jobs", ids)
	}
}
