package service

import (
	"context"
	"errors"
	"fmt"
	"os/user"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/notify"
)

// Control is what the service keeps open between operations: the catalog,
// the task manager that records every long operation in it, and the
// notifier that tells people how they ended. A one-shot command opens it
// at its first task and closes it at exit; `coffer run` and `coffer
// server` open it at start (Service.Start) with the history's pruning and
// the delivery of notifications running in the background.
type Control struct {
	Catalog  catalog.Catalog
	tasks    *job.Manager
	Notifier *notify.Notifier
	// delivering: this process sends notifications (Start with Deliver,
	// or a command line's first event), and at close gives what is due
	// a moment to go out.
	mu         sync.Mutex
	delivering bool
}

// Emit records an event for the notification targets and makes sure this
// process sends it: a command-line process starts delivering at its
// first event (not before: a command that tells nothing never waits on a
// target that is down), and gives it a moment at exit; what cannot be
// sent by then stays pending for the server.
func (c *Control) Emit(ctx context.Context, ev notify.Event) error {
	if c.Notifier == nil {
		return nil
	}
	if err := c.Notifier.Emit(ctx, ev); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.delivering {
		c.Notifier.Start(context.Background())
		c.delivering = true
	}
	return nil
}

// StartOptions say what runs in the background of a long-lived process.
type StartOptions struct {
	// Prune prunes the task history older than Config.TaskHistory once a
	// day (the sweep of tasks whose process died runs in every process).
	Prune bool
	// Deliver sends the notifications this process and others recorded
	// (the server's dispatcher); without it they wait in the catalog
	// for a process that delivers.
	Deliver bool
}

// Start opens the catalog, the task manager and the notifier now, with
// the background work o asks for, rather than at the first task (a
// command-line process records its tasks and notifications without
// pruning or delivering: the server delivers what it leaves pending).
// A second Start does nothing. Close stops it.
func (s *Service) Start(ctx context.Context, o StartOptions) error {
	s.ctlMu.Lock()
	defer s.ctlMu.Unlock()
	if s.ctl != nil {
		return nil // the first start wins: `coffer server` starts once
	}
	ctl, err := s.openControl(ctx, o)
	if err != nil {
		return err
	}
	s.ctl = ctl
	return nil
}

// jobManager returns the task manager, opening the catalog at first use.
func (s *Service) jobManager(ctx context.Context) (*job.Manager, error) {
	ctl, err := s.Control(ctx)
	if err != nil {
		return nil, err
	}
	return ctl.tasks, nil
}

// JobManager is the manager that records this service's tasks (the
// server's API lists, follows and cancels tasks through it).
func (s *Service) JobManager(ctx context.Context) (*job.Manager, error) { return s.jobManager(ctx) }

// Notifier is the notifier this service emits through (nil without
// notification targets in a process that does not deliver).
func (s *Service) Notifier(ctx context.Context) (*notify.Notifier, error) {
	ctl, err := s.Control(ctx)
	if err != nil {
		return nil, err
	}
	return ctl.Notifier, nil
}

// Emitter is where events go: the notifier, or nowhere.
func (s *Service) Emitter(ctx context.Context) notify.Emitter {
	if ctl, err := s.Control(ctx); err == nil && ctl.Notifier != nil {
		return ctl
	}
	return notify.Discard
}

func (s *Service) Control(ctx context.Context) (*Control, error) {
	s.ctlMu.Lock()
	defer s.ctlMu.Unlock()
	if s.ctl != nil {
		return s.ctl, nil
	}
	if s.ctlErr != nil {
		return nil, s.ctlErr // said once: every task would say it again
	}
	ctl, err := s.openControl(ctx, StartOptions{})
	if err != nil {
		s.ctlErr = err
		return nil, err
	}
	s.ctl = ctl
	return ctl, nil
}

func (s *Service) openControl(ctx context.Context, o StartOptions) (*Control, error) {
	cat, err := s.OpenCatalog(ctx)
	if err != nil {
		return nil, err
	}
	ctl := &Control{Catalog: cat}
	// The targets and matchers in effect: the file's and those created
	// through the API. A process that delivers (the server) keeps a
	// notifier even without targets: one created later takes effect
	// when the server reloads its configuration (Notifier.Reload).
	nc := s.Config.Notify
	if st, err := s.effectiveFrom(ctx, cat); err == nil {
		nc = st.Notify
	} else {
		s.log.Warn("reading the notification targets created through the API failed: using the configuration file's", "err", err)
	}
	if o.Deliver || (nc != nil && len(nc.Targets) > 0) {
		ctl.Notifier, err = notify.New(nc, cat, notify.Options{Logger: s.log})
		if err != nil {
			cat.Close()
			return nil, Invalidf("notifications: %v", err)
		}
		if o.Deliver {
			ctl.Notifier.Start(context.Background())
			ctl.delivering = true
		}
	}
	to := job.Options{Worker: s.Config.Worker, User: s.Config.User, Logger: s.log, Retention: s.Config.TaskHistory,
		Finished: func(j job.Record) { s.taskFinished(ctl, j) }}
	if !o.Prune {
		to.PruneEvery = -1
	}
	ctl.tasks, err = job.New(ctx, cat, to)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("task manager: %w", err), ctl.close())
	}
	return ctl, nil
}

// Close closes what the service keeps open: the task manager (tasks
// still running keep their rows), the notifier (attempts in flight get
// a few seconds) and the catalog.
func (s *Service) Close() error {
	s.ctlMu.Lock()
	ctl := s.ctl
	s.ctl, s.ctlErr = nil, nil
	s.ctlMu.Unlock()
	if ctl == nil {
		return nil
	}
	return ctl.close()
}

func (c *Control) close() error {
	var errs []error
	if c.tasks != nil {
		errs = append(errs, c.tasks.Close())
	}
	if c.Notifier != nil {
		ctx, cancel := context.WithTimeout(context.Background(), drainFor)
		c.mu.Lock()
		delivering := c.delivering
		c.mu.Unlock()
		if delivering {
			c.drain(ctx)
		}
		errs = append(errs, c.Notifier.Close(ctx))
		cancel()
	}
	errs = append(errs, c.Catalog.Close())
	return errors.Join(errs...)
}

// localUser names the person running a command-line process in the tasks
// it records.
func localUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return ""
}

// controlState guards the service's control.
type controlState struct {
	superseded atomic.Pointer[error] // superseded.go
	ctlMu      sync.Mutex
	ctl        *Control
	ctlErr     error
	// bootSem bounds the boot verifications running at once (bootslots.go).
	bootMu  sync.Mutex
	bootSem *semaphore.Weighted
	bootCap int
	// ownLimiter hands out the engine's limits' slots while this process
	// runs no engine (media_slots.go).
	limiterMu  sync.Mutex
	ownLimiter *engine.Limiter
	// serving is the engine of this process's RunSchedules while it
	// runs: policy runs and VM backups started through the API join it,
	// so that the limits hold across them and the scheduled runs
	// (servingEngine).
	serving atomic.Pointer[engine.Engine]
	// servingOptions are what the serving engine's options add that an
	// engine of a run's own takes too (Serve).
	servingOptions atomic.Pointer[[]func(*engine.Options)]
	// servingSoon, set by a server before it answers requests, holds
	// runs back until its RunSchedules serves its engine (ExpectServing).
	servingSoon atomic.Pointer[servingGate]
	// remote runs operations on the fleet's workers (remote.go).
	remote remoteSlot
}

// drainFor bounds how long a stopping process gives its notifications.
const drainFor = 10 * time.Second

// drainPoll is how often a stopping process looks whether what was due
// has gone out.
const drainPoll = 50 * time.Millisecond

// drain waits, until ctx ends, for the deliveries due now to be sent (or
// to fail and be put off): `coffer run` tells how its run ended before it
// exits. What is left stays pending in the catalog for the server.
func (c *Control) drain(ctx context.Context) {
	for {
		due, err := c.Catalog.NextDeliveryDue(ctx)
		if err != nil || due.IsZero() || due.After(time.Now()) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(drainPoll):
		}
	}
}
