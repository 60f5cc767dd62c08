// Package leader decides which of several coffer servers sharing a
// catalog runs the scheduled jobs (policies and maintenance): the one
// holding the catalog's lease "schedules". The holder renews the lease
// every third of its duration; when it stops it releases the lease, and
// when it dies the lease expires, after which another server takes it
// within a third of the duration more. No consensus protocol: the
// catalog's database decides, in one conditional statement, who holds the
// lease (catalog.Leases).
//
// A lease alone cannot promise that a run never happens twice (a holder
// frozen past its lease's end wakes up believing it still holds it), so
// each scheduled run is also claimed once in the catalog (Claim): a
// second claim of the same run is refused whoever makes it.
package leader

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/version"
)

// DefaultTTL is how long a lease lasts without renewal: the bound on how
// long the schedules of a server that died wait for another server.
const DefaultTTL = 30 * time.Second

// Schedules is the name of the lease on the scheduled jobs.
const Schedules = "schedules"

// Elector campaigns for a lease and runs the leader's work while it
// holds it.
type Elector struct {
	Leases catalog.Leases
	// Name is the lease's name (default Schedules); Holder names this
	// process (default: host/pid/process start, see Holder).
	Name, Holder string
	// TTL is the lease's duration (default DefaultTTL).
	TTL    time.Duration
	Logger *slog.Logger
	// Now and After are the clock (tests drive them).
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
	// Changed, when set, is told each change: held or lost.
	Changed func(held bool)
}

// Holder names this process in leases and claims: host, PID and the
// process's start (a PID reused by another process is another holder),
// then, after an "@", coffer's version (`coffer upgrade check` names the
// holders of other versions).
func Holder() string {
	host, _ := os.Hostname()
	start, _ := repo.ProcessStart(os.Getpid())
	return fmt.Sprintf("%s/%d/%d@%s", host, os.Getpid(), start, version.Get().Version)
}

// HolderVersion is the coffer version a holder names, "" for a holder
// that names none (v0.1.0 and earlier did not).
func HolderVersion(holder string) string {
	if i := strings.LastIndexByte(holder, '@'); i >= 0 {
		return holder[i+1:]
	}
	return ""
}

func (e *Elector) defaults() {
	if e.Name == "" {
		e.Name = Schedules
	}
	if e.Holder == "" {
		e.Holder = Holder()
	}
	if e.TTL <= 0 {
		e.TTL = DefaultTTL
	}
	if e.Logger == nil {
		e.Logger = slog.New(slog.DiscardHandler)
	}
	if e.Now == nil {
		e.Now = time.Now
	}
	if e.After == nil {
		e.After = time.After
	}
}

// Run campaigns until ctx ends. While this process holds the lease, lead
// runs with a context that ends when the lease is lost or ctx ends; lead
// must return soon after (it is waited for before campaigning again, so
// the leader's work never runs twice in one process). When ctx ends, a
// lease held is released: another server takes over at once.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context)) error {
	e.defaults()
	every := e.TTL / 3
	var (
		leading bool
		expires time.Time
		work    *leaderWork
	)
	stop := func() {
		if !leading {
			return
		}
		work.stop()
		leading = false
		if e.Changed != nil {
			e.Changed(false)
		}
	}
	defer func() {
		stop()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := e.Leases.ReleaseLease(rctx, e.Name, e.Holder); err != nil {
			e.Logger.Warn("releasing the schedules' lease failed: another server takes over when it expires", "err", err)
		}
	}()
	for {
		now := e.Now()
		l, held, err := e.Leases.AcquireLease(ctx, e.Name, e.Holder, now, e.TTL)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			e.Logger.Warn("renewing the schedules' lease failed", "err", err)
			// Lead on while the lease surely lasts; step down before it
			// could have passed to another server.
			if leading && !now.Before(expires.Add(-every)) {
				e.Logger.Warn("stepping down: the schedules' lease could not be renewed in time")
				stop()
			}
		case held && !leading:
			e.Logger.Info("this server runs the schedules", "lease", e.Name, "epoch", l.Epoch)
			leading, expires = true, l.ExpiresAt
			work = startWork(ctx, lead)
			if e.Changed != nil {
				e.Changed(true)
			}
		case held:
			expires = l.ExpiresAt
		case leading:
			e.Logger.Warn("another server took the schedules over", "holder", l.Holder)
			stop()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-e.After(every):
		}
	}
}

// Claim claims one run of a schedule (a policy's, a maintenance job's) at
// its slot, the time the schedule named: true for the one process that
// gets it.
func Claim(ctx context.Context, leases catalog.Leases, holder, schedule string, slot, now time.Time) (bool, error) {
	return leases.ClaimRun(ctx, schedule, slot, holder, now)
}

// leaderWork is the leader's work while it runs.
type leaderWork struct {
	cancel context.CancelFunc
	ended  chan struct{}
}

func startWork(ctx context.Context, lead func(context.Context)) *leaderWork {
	ctx, cancel := context.WithCancel(ctx)
	w := &leaderWork{cancel: cancel, ended: make(chan struct{})}
	go func() {
		defer close(w.ended)
		lead(ctx)
	}()
	return w
}

// stop ends the work and waits for it.
func (w *leaderWork) stop() {
	w.cancel()
	<-w.ended
}
