package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// Options tune a Notifier; zero fields take the defaults.
type Options struct {
	Logger *slog.Logger
	// Concurrency bounds the deliveries in flight, and so the queue in
	// memory: the others wait in the catalog (default 4).
	Concurrency int
	// PollInterval is how often the catalog is looked at for deliveries
	// other processes recorded (a CLI command that emitted and exited),
	// besides when this process emits or a retry falls due (default 1m).
	PollInterval time.Duration
	// Observe, when set, is called after each attempt is recorded (the
	// server forwards it to the console; tests wait on it). It runs in
	// the sending goroutine and must not block.
	Observe func(Attempt)
}

// Attempt is the outcome of one delivery attempt, as recorded.
type Attempt struct {
	Delivery int64
	Event    int64
	Type     Type
	Target   string
	Status   catalog.DeliveryStatus // delivered, pending (retried later) or failed (given up)
	Attempts int                    // attempts so far, this one included
	Error    string
	Next     time.Time // pending only
}

// sender delivers an event to one target.
type sender interface {
	// check reads the files the target needs (secret, CA), so that a
	// missing one is reported when the configuration is loaded.
	check() error
	Send(ctx context.Context, ev Event, delivery int64, timeout time.Duration) error
}

// Notifier routes events to targets and delivers them in the background.
// Emit records what it routes in the catalog first, so a delivery is never
// lost: a process that stops or dies leaves it pending, and the next
// Notifier on the same catalog (this process restarted, or the server)
// sends it.
type Notifier struct {
	store catalog.Notifications
	opts  Options
	log   *slog.Logger

	mu      sync.RWMutex
	cfg     *Config
	senders map[string]sender // enabled targets

	wake        chan struct{} // something was emitted or retried
	slotFreed   chan struct{}
	slots       chan struct{}      // one per delivery in flight
	stopLoop    context.CancelFunc // ends claiming
	cancelSends context.CancelFunc // cuts the attempts in flight short
	done        chan struct{}      // closed when the loop has ended
	inflight    sync.WaitGroup
}

var _ Emitter = (*Notifier)(nil)

// New checks cfg (Validate, and the secret and CA files of every enabled
// target) and returns a Notifier that records into store. Delivery starts
// with Start.
func New(cfg *Config, store catalog.Notifications, o Options) (*Notifier, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Minute
	}
	n := &Notifier{store: store, opts: o, log: o.Logger, wake: make(chan struct{}, 1),
		slotFreed: make(chan struct{}, 1), slots: make(chan struct{}, o.Concurrency)}
	if err := n.Reload(cfg); err != nil {
		return nil, err
	}
	return n, nil
}

// Reload replaces the configuration (the API edited it, or the file
// changed) once it is valid and its files can be read; on error the old
// one stays. Pending deliveries to a target that is gone fail when due.
func (n *Notifier) Reload(cfg *Config) error {
	if cfg == nil {
		cfg = &Config{}
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	senders := map[string]sender{}
	var errs []error
	for _, t := range cfg.Targets {
		if t.Disable {
			continue
		}
		s := newSender(t)
		if err := s.check(); err != nil {
			errs = append(errs, fmt.Errorf("target %s: %w", t.Name, err))
		}
		senders[t.Name] = s
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	n.mu.Lock()
	n.cfg, n.senders = cfg, senders
	n.mu.Unlock()
	return nil
}

// Config returns the configuration in use (callers must not change it;
// the edits of Config return new ones for Reload).
func (n *Notifier) Config() *Config {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.cfg
}

func newSender(t Target) sender {
	if t.SMTP != nil {
		return &smtpSender{target: t.Name, cfg: *t.SMTP}
	}
	return &webhookSender{target: t.Name, cfg: *t.Webhook}
}

// Emit routes ev and records it with one pending delivery per target it
// goes to; it returns once that is durable (nothing is recorded when no
// target wants the event). Sending happens in the background.
func (n *Notifier) Emit(ctx context.Context, ev Event) error {
	if ev.Type == "" || ev.Title == "" {
		return fmt.Errorf("notify: an event needs a type and a title (got %q, %q)", ev.Type, ev.Title)
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	ev.Time = ev.Time.UTC()
	n.mu.RLock()
	targets := n.cfg.Route(ev)
	n.mu.RUnlock()
	if len(targets) == 0 {
		return nil
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	rec := &catalog.NotificationEvent{Time: ev.Time, Type: string(ev.Type), Severity: string(ev.Severity),
		Object: ev.Object, Title: ev.Title, Data: data}
	if _, err := n.store.AddNotification(ctx, rec, targets); err != nil {
		return fmt.Errorf("notify: record %s event: %w", ev.Type, err)
	}
	n.poke(n.wake)
	return nil
}

// Retry makes a failed delivery pending again, due now (the console's
// retry button): a refusal fails it again, a passing error is retried
// within the attempts it has left, at least one.
func (n *Notifier) Retry(ctx context.Context, delivery int64) error {
	if err := n.store.RetryDelivery(ctx, delivery, time.Now()); err != nil {
		return err
	}
	n.poke(n.wake)
	return nil
}

// SendTest sends a test event to the configured target name now, whether
// or not it is enabled, and returns the outcome; nothing is recorded.
func (n *Notifier) SendTest(ctx context.Context, name string) error {
	n.mu.RLock()
	t, ok := n.cfg.Target(name)
	d := n.cfg.Delivery.WithDefaults()
	n.mu.RUnlock()
	if !ok {
		return fmt.Errorf("no notification target is named %q", name)
	}
	return SendTest(ctx, t, time.Duration(d.Timeout))
}

// SendTest sends a test event to t, which need not be configured (the
// console tests a target before saving it), within timeout (0: the
// default), and returns the outcome.
func SendTest(ctx context.Context, t Target, timeout time.Duration) error {
	if err := t.Validate(); err != nil {
		return err
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	s := newSender(t)
	if err := s.check(); err != nil {
		return fmt.Errorf("target %s: %w", t.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := s.Send(ctx, testEvent(t.Name, time.Now().UTC()), 0, timeout); err != nil {
		return fmt.Errorf("target %s: %w", t.Name, err)
	}
	return nil
}

// poke signals a channel of capacity one without blocking: one pending
// signal is as good as several.
func (n *Notifier) poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
