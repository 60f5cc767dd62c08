package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine/latency"
)

// Config is a worker's identity and timings.
type Config struct {
	Name, Host string
	Version    string // coffer's
	Slots      int
	Reach      Reach
	// Protocol is the fleet protocol the worker speaks (0: Protocol;
	// another one only to test that the servers refuse it).
	Protocol int
	// Heartbeat is how often the worker renews (0: DefaultHeartbeat);
	// DeadAfter is how long the servers wait for a renewal before they
	// declare the worker lost (0: DefaultDeadAfter). The worker fences
	// itself after half of DeadAfter without one, so it has stopped
	// before its work can be given to another.
	Heartbeat, DeadAfter time.Duration
	Log                  *slog.Logger // nil: slog.Default()
}

// Work is what a worker runs (the seam of the River client that executes
// operations, plugged in by the fleet's hand-off). It runs until ctx ends
// (the worker fenced itself: running work must end at once), or until
// drain closes: then it takes no new work and returns once the work
// running has finished.
type Work func(ctx context.Context, drain <-chan struct{}) error

// Member is a worker's membership of the fleet: its registration, its
// heartbeat, its fence and its drain.
type Member struct {
	reg       Registrar
	cfg       Config
	log       *slog.Logger
	w         Worker
	drainOnce sync.Once
	drain     chan struct{}
	mu        sync.Mutex
	renewed   time.Time // the heartbeat_at of the last renewal
	fenceErr  error
	// latency is the worker's latency watch: the datastores its units
	// read, and how it throttles them (Latency).
	latency *latency.Watch
}

// Latency lists the datastores the worker's units read now, with the
// read rates it throttles them to (the worker's metrics).
func (m *Member) Latency() []latency.Datastore { return m.latency.Datastores() }

// Join registers a worker: a name already registered is taken over (the
// process that held it is fenced). A protocol the servers do not speak is
// refused with an error wrapping ErrProtocol.
func Join(ctx context.Context, reg Registrar, cfg Config) (*Member, error) {
	if cfg.Protocol == 0 {
		cfg.Protocol = Protocol
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.DeadAfter <= 0 {
		cfg.DeadAfter = DefaultDeadAfter
	}
	if cfg.Heartbeat >= cfg.DeadAfter/2 {
		return nil, fmt.Errorf("fleet: the heartbeat (%s) must be shorter than half the dead interval (%s)", cfg.Heartbeat, cfg.DeadAfter)
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	now := time.Now()
	w, err := reg.Register(ctx, Worker{Name: cfg.Name, Host: cfg.Host, Version: cfg.Version, Protocol: cfg.Protocol,
		Reach: cfg.Reach, Slots: cfg.Slots}, now)
	if err != nil {
		return nil, err
	}
	log.Info("worker registered", "worker", w.Name, "epoch", w.Epoch, "slots", w.Slots, "protocol", w.Protocol)
	return &Member{reg: reg, cfg: cfg, log: log, w: w, drain: make(chan struct{}), renewed: w.HeartbeatAt, latency: latency.NewWatch(nil)}, nil
}

// Worker is the registration the member holds.
func (m *Member) Worker() Worker { return m.w }

// Drain asks the worker to take no new work and stop once its running
// work has finished (SIGTERM); the registry shows it draining, so the
// dispatcher grants it nothing more. An operator's drain through the
// catalog reaches the worker with its next heartbeat.
func (m *Member) Drain(ctx context.Context) error {
	// The registry first: once the work has seen the drain it may end,
	// and the worker deregister, at once.
	_, err := m.reg.SetState(ctx, m.w.Name, m.w.Epoch, catalog.WorkerDraining)
	m.startDrain("asked")
	return err
}

func (m *Member) startDrain(why string) {
	m.drainOnce.Do(func() {
		m.log.Info("worker draining", "worker", m.w.Name, "by", why)
		close(m.drain)
	})
}

// Run marks the worker ready and runs work while it renews its
// heartbeat. It returns nil once a drained work has ended (the worker is
// then deregistered), an error wrapping catalog.ErrFenced when the
// worker was fenced (its work's context was cancelled), or work's error
// (the registration is left for the servers to declare lost, so that
// what the worker held is re-admitted).
func (m *Member) Run(ctx context.Context, work Work) error {
	w, err := m.reg.SetState(ctx, m.w.Name, m.w.Epoch, catalog.WorkerReady)
	if err != nil {
		return fmt.Errorf("fleet: worker %s: %w", m.w.Name, err)
	}
	if w.State == catalog.WorkerDraining {
		m.startDrain("the registry")
	}
	workCtx, cancelWork := context.WithCancel(ctx)
	defer cancelWork()
	beatCtx, stopBeat := context.WithCancel(ctx)
	beaten := make(chan struct{})
	go func() {
		defer close(beaten)
		m.heartbeat(beatCtx, cancelWork)
	}()
	err = work(workCtx, m.drain)
	stopBeat()
	<-beaten
	if fenced := m.fenced(); fenced != nil {
		return fenced
	}
	if err != nil {
		return fmt.Errorf("fleet: worker %s: %w", m.w.Name, err)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := m.reg.Deregister(context.WithoutCancel(ctx), m.w.Name, m.w.Epoch); err != nil {
		return fmt.Errorf("fleet: worker %s: %w", m.w.Name, err)
	}
	m.log.Info("worker drained and deregistered", "worker", m.w.Name)
	return nil
}

func (m *Member) fenced() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fenceErr
}

// heartbeat renews every Heartbeat until ctx ends. A renewal the catalog
// refuses fences the worker at once; renewals that fail otherwise fence
// it once half the dead interval has passed since the last one that
// worked, which is why each renewal may take only until then.
func (m *Member) heartbeat(ctx context.Context, cancelWork context.CancelFunc) {
	tick := time.NewTicker(m.cfg.Heartbeat)
	defer tick.Stop()
	var lastErr error
	for {
		deadline := m.renewed.Add(m.cfg.DeadAfter / 2)
		expired := time.NewTimer(time.Until(deadline))
		select {
		case <-ctx.Done():
			expired.Stop()
			return
		case <-expired.C:
			m.fence(cancelWork, fmt.Errorf("%w: worker %s fenced itself: no heartbeat renewed for %s (%v)",
				catalog.ErrFenced, m.w.Name, m.cfg.DeadAfter/2, lastErr))
			return
		case <-tick.C:
			expired.Stop()
		}
		now := time.Now()
		rctx, cancel := context.WithDeadline(ctx, deadline)
		w, err := m.reg.Heartbeat(rctx, m.w.Name, m.w.Epoch, now)
		cancel()
		switch {
		case errors.Is(err, catalog.ErrFenced):
			m.fence(cancelWork, err)
			return
		case err != nil:
			lastErr = err
			m.log.Warn("worker heartbeat failed", "worker", m.w.Name, "err", err)
			continue
		}
		m.renewed = now
		if w.State == catalog.WorkerDraining {
			m.startDrain("the registry")
		}
	}
}

func (m *Member) fence(cancelWork context.CancelFunc, err error) {
	m.mu.Lock()
	m.fenceErr = err
	m.mu.Unlock()
	m.log.Error("worker fenced: its running work is cancelled", "worker", m.w.Name, "err", err)
	cancelWork()
}
