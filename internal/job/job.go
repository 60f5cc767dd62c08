// Package job runs coffer's long operations as jobs: a backup of a policy
// or a VM, a restore, verify, gc, forget, copy, an instant-recovery
// session, a repair. (A job's per-VM units are its tasks: catalog.Task,
// the API's VMTask.) A job is a row of the catalog (package catalog:
// kind, status, the object it acts on, the user and token that started it,
// progress, times, error), its log is the job's events, numbered 1, 2,
// 3..., and it survives restarts because the catalog is the only place it
// lives: any process, on any host sharing the catalog, lists it, reads
// its log, follows it and cancels it.
//
// The Manager of a process starts jobs (Start, or StartJob for the
// engine) and hands out a Handle to the code doing the work, which logs,
// reports progress and finishes through it. Cancel sets a flag in the
// catalog; the owning process hears of it at once when it is the caller,
// through PostgreSQL's LISTEN/NOTIFY on a shared PostgreSQL catalog, and
// by polling the catalog (Options.PollInterval) on SQLite, and cancels the
// job's context. Subscribe follows one job or all of them: status
// changes, log lines and progress samples reach a subscriber in the same
// process as soon as they are recorded, and in other processes through
// the same notices or polls.
//
// A job whose process died is marked failed ("interrupted") by the next
// Manager that notices: at once on the same host (the process is gone, or
// its PID belongs to another process), after Options.StaleAfter without a
// heartbeat from another host. Finished jobs and their logs are pruned
// after Options.Retention, in bounded batches.
package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/repo"
)

// Record is a job as the catalog records it; Line a line of its log.
type (
	Record   = catalog.Job
	Line     = catalog.Event
	Progress = catalog.Progress
	Status   = catalog.Status
)

// Kinds of jobs.
const (
	KindBackupPolicy = catalog.KindBackupPolicy
	KindBackupVM     = catalog.KindBackupVM
	KindBackupDisk   = catalog.KindBackupDisk
	KindRestore      = catalog.KindRestore
	KindRestoreVM    = catalog.KindRestoreVM
	KindRestoreFiles = catalog.KindRestoreFiles
	KindVerify       = catalog.KindVerify
	KindGC           = catalog.KindGC
	KindForget       = catalog.KindForget
	KindCopy         = catalog.KindCopy
	KindInstant      = catalog.KindInstant
	KindRepair       = catalog.KindRepair
	KindVerifyBoot   = catalog.KindVerifyBoot
	KindCleanup      = catalog.KindCleanup
	KindMediaCopy    = catalog.KindMediaCopy
	KindMediaRestore = catalog.KindMediaRestore
	KindMediaVerify  = catalog.KindMediaVerify
	KindInventory    = catalog.KindInventory
	KindReplicate    = catalog.KindReplicate
	KindFailover     = catalog.KindFailover
)

var (
	// ErrCancelled is the cause of a job context cancelled by Cancel.
	ErrCancelled = errors.New("task cancelled")
	// ErrNotFound: no job has this ID (it wraps catalog.ErrNotFound).
	ErrNotFound = catalog.ErrNotFound
	// ErrFinished: the job has already finished (nothing to cancel).
	ErrFinished = catalog.ErrFinished
	// ErrInvalid: a malformed request (a cursor that is not one of ours, a
	// limit out of range).
	ErrInvalid = errors.New("invalid request")
)

// Options tune a Manager. Zero values take the defaults.
type Options struct {
	// Host names this machine in job owners (default: os.Hostname);
	// Worker is recorded as the job's worker (default: Host).
	Host   string
	Worker string
	// User starts jobs whose context names nobody (see WithUser): the
	// local user of a command-line process.
	User   string
	Logger *slog.Logger
	// PollInterval: how often a catalog that cannot push changes
	// (SQLite) is read for other processes' changes while something is
	// followed or running here (default 250 ms).
	PollInterval time.Duration
	// HeartbeatInterval: how often a running job shows it is alive
	// (default 15 s). StaleAfter: how long a job of another host may go
	// without one before it is judged interrupted (default 2 min).
	HeartbeatInterval time.Duration
	StaleAfter        time.Duration
	// ProgressInterval: the least time between two progress samples
	// written for one job (default 1 s); samples in between are merged.
	// LineInterval: the least time between two writes of a job's log
	// lines (default 100 ms); lines in between are written together.
	ProgressInterval time.Duration
	LineInterval     time.Duration
	// Retention: finished jobs older than this are pruned with their
	// logs (default 90 days; negative: never). PruneEvery: how often the
	// Manager prunes in the background, first right after New (default
	// 24 h; negative: never, call Prune). PruneBatch bounds the rows
	// deleted per transaction (default 5000).
	Retention  time.Duration
	PruneEvery time.Duration
	PruneBatch int
	// Finished, when set, is called with every job this Manager's
	// handles finish, once its end is recorded (notifications and
	// metrics hang here). It runs in the finishing goroutine: it must
	// not block for long.
	Finished func(Record)
	// Now is the clock (tests).
	Now func() time.Time
}

// DefaultRetention is how long finished jobs are kept by default.
const DefaultRetention = 90 * 24 * time.Hour

func (o *Options) defaults() {
	if o.Host == "" {
		o.Host, _ = os.Hostname()
	}
	if o.Worker == "" {
		o.Worker = o.Host
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.PollInterval, 250*time.Millisecond)
	def(&o.HeartbeatInterval, 15*time.Second)
	def(&o.StaleAfter, 2*time.Minute)
	def(&o.ProgressInterval, time.Second)
	def(&o.LineInterval, 100*time.Millisecond)
	def(&o.Retention, DefaultRetention)
	def(&o.PruneEvery, 24*time.Hour)
	if o.PruneBatch <= 0 {
		o.PruneBatch = 5000
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Manager runs the jobs of one process. Safe for concurrent use.
type Manager struct {
	cat   catalog.Catalog
	o     Options
	log   *slog.Logger
	owner catalog.Owner
	hub   *hub

	ctx  context.Context // until Close
	stop context.CancelFunc
	bg   sync.WaitGroup
	wake chan struct{} // something new to follow: the watcher starts polling
	// linesOn: the watcher listens for lines (lineListener); heard
	// counts the notices it heard: of lines, and the others.
	linesOn atomic.Bool
	heard   struct{ lines, others atomic.Int64 }

	mu    sync.Mutex
	owned map[int64]*Handle
	ended map[int64]time.Time // jobs whose handles finished lately
}

// New starts a Manager over an open catalog. It first marks the jobs
// whose process is gone as interrupted (see Recover), then follows other
// processes' changes and prunes old history in the background until Close.
func New(ctx context.Context, cat catalog.Catalog, o Options) (*Manager, error) {
	m, err := newManager(cat, o)
	if err != nil {
		return nil, err
	}
	if _, err := m.Recover(ctx); err != nil {
		return nil, err
	}
	m.ctx, m.stop = context.WithCancel(context.WithoutCancel(ctx))
	notices, err := cat.WatchJobs(m.ctx)
	switch {
	case err == nil:
		m.background(func() { m.follow(notices) })
	case errors.Is(err, errors.ErrUnsupported):
		m.background(m.poll)
	default:
		m.stop()
		return nil, fmt.Errorf("task manager: %w", err)
	}
	m.background(m.maintain)
	return m, nil
}

func newManager(cat catalog.Catalog, o Options) (*Manager, error) {
	o.defaults()
	start, err := repo.ProcessStart(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("task manager: read this process's start time: %w", err)
	}
	return &Manager{cat: cat, o: o, log: o.Logger, hub: newHub(), wake: make(chan struct{}, 1), owned: map[int64]*Handle{},
		ended: map[int64]time.Time{}, owner: catalog.Owner{Host: o.Host, PID: os.Getpid(), Start: start}}, nil
}

// MarkInterrupted marks the jobs whose process is gone as interrupted,
// as New does, without starting a manager: for a command that only reads
// jobs (coffer jobs) and must not show dead ones running.
func MarkInterrupted(ctx context.Context, cat catalog.Catalog, o Options) (int, error) {
	m, err := newManager(cat, o)
	if err != nil {
		return 0, err
	}
	return m.Recover(ctx)
}

func (m *Manager) background(f func()) {
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		f()
	}()
}

// Close stops following changes and pruning, and ends every
// subscription. Jobs still running keep their handles (their rows are
// theirs to finish); the catalog stays open.
func (m *Manager) Close() error {
	m.stop()
	m.bg.Wait()
	m.hub.closeAll()
	return nil
}

// Owner is this process as job rows record it.
func (m *Manager) Owner() catalog.Owner { return m.owner }

// User is who starts a job: an authenticated user, and the API token
// when the request came with one.
type User struct {
	Name  string
	Token string
}

type userKey struct{}

// WithUser returns a context whose jobs are started by u: the service
// layer puts the authenticated user there.
func WithUser(ctx context.Context, u User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the user of a context.
func UserFrom(ctx context.Context) (User, bool) {
	u, ok := ctx.Value(userKey{}).(User)
	return u, ok
}

// Spec describes a job to start.
type Spec struct {
	Kind string
	// Object is the access-control path it acts on: /repositories/main,
	// /policies/nightly, /connections/kvm1/vm/web-1.
	Object     string
	Policy     string
	Repository string
	VM         string
	// User and Token override the context's user (WithUser).
	User  string
	Token string
	// Queued starts the job waiting (for a lock, a slot); Handle.Begin
	// marks it running.
	Queued bool
}

// Start records a new job and returns the handle of the code that runs
// it. The job's context (Handle.Context) derives from ctx: pass a context
// that lives as long as the work should, not a request's.
func (m *Manager) Start(ctx context.Context, s Spec) (*Handle, error) {
	if s.Kind == "" {
		return nil, fmt.Errorf("%w: a task needs a kind", ErrInvalid)
	}
	j := Record{Kind: s.Kind, Object: s.Object, Policy: s.Policy, Repository: s.Repository, VM: s.VM,
		User: s.User, Token: s.Token, Status: catalog.StatusRunning}
	if s.Queued {
		j.Status = catalog.StatusQueued
	}
	return m.StartJob(ctx, j)
}

// StartJob records j as a new job (the engine's entry: it builds its own
// job record) and returns its handle. Empty fields get the Manager's
// defaults: the worker, this process as owner, the context's user, now.
func (m *Manager) StartJob(ctx context.Context, j Record) (*Handle, error) {
	now := m.now()
	if j.User == "" {
		u, ok := UserFrom(ctx)
		if !ok {
			u = User{Name: m.o.User}
		}
		j.User, j.Token = u.Name, u.Token
	}
	if j.Status == "" {
		j.Status = catalog.StatusRunning
	}
	if j.Worker == "" {
		j.Worker = m.o.Worker
	}
	if j.CreatedAt.IsZero() {
		j.CreatedAt = now
	}
	if j.StartedAt.IsZero() && j.Status == catalog.StatusRunning {
		j.StartedAt = j.CreatedAt
	}
	j.Owner, j.Heartbeat = m.owner, now
	if err := m.cat.CreateJob(ctx, &j); err != nil {
		return nil, fmt.Errorf("record task: %w", err)
	}
	h := newHandle(m, ctx, j)
	m.mu.Lock()
	m.owned[j.ID] = h
	m.mu.Unlock()
	m.hub.publishState(j, EventStatus)
	m.kick()
	go h.loop()
	return h, nil
}

// now is the time as the catalog stores it (UTC, microseconds), so that
// what this process publishes equals what others read.
func (m *Manager) now() time.Time { return m.o.Now().UTC().Truncate(time.Microsecond) }

// kick wakes the watcher: there is something new to follow, or
// something followed no longer is.
func (m *Manager) kick() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *Manager) handle(id int64) *Handle {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.owned[id]
}

// release forgets a finished job's handle, and remembers its end for a
// while: the watcher must not take the notices of its end for another
// process's news.
func (m *Manager) release(h *Handle) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.owned, h.id)
	for id, t := range m.ended {
		if now.Sub(t) > endMemory {
			delete(m.ended, id)
		}
	}
	m.ended[h.id] = now
}

func (m *Manager) endedHere(id int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.ended[id]
	return ok
}
