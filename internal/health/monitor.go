package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/bootverify"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/metrics"
	"github.com/coffer-backup/coffer/internal/notify"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/stats"
)

// Options configure a Monitor; zero durations take the defaults of the
// maintenance section.
type Options struct {
	Catalog catalog.Catalog
	Config  *policy.Config
	// Judge judges the fleet against its RPOs (nil: not judged; no
	// rpo-missed, no VM counts).
	Judge Judge
	// Repositories names the repositories to watch ("default" is the
	// repository of --repo); Open opens one by those names, Location
	// says where it is (a directory's file system gives its capacity).
	Repositories []string
	Open         func(ctx context.Context, name string) (*repo.Repository, error)
	Location     func(name string) string
	// Capacity is what a repository may hold, by name, where its store
	// cannot tell (S3).
	Capacity map[string]int64
	// FullPercent warns when a repository's usage passes it;
	// LockWarning is the horizon of lock-lapsing.
	FullPercent float64
	LockWarning time.Duration
	// CheckEvery is how often the catalog is read (metrics, RPO);
	// StatsEvery how often the repositories' statistics are computed.
	CheckEvery, StatsEvery time.Duration
	Metrics                *metrics.Metrics
	Emitter                notify.Emitter
	// Notifying reports whether this process tells the targets (it runs
	// the schedules); nil: always.
	Notifying func() bool
	Logger    *slog.Logger
	Now       func() time.Time
}

// Monitor runs the checks.
type Monitor struct {
	o Options

	mu sync.Mutex
	// cfg and repos are Options' Config and Repositories, replaced by
	// Reload when the configuration in effect changes.
	cfg     *policy.Config
	repos   []string
	missed  map[catalog.VMRef]bool // VMs notified as outside their RPO, until back within
	full    map[string]bool        // repositories notified as full, until below the threshold
	lapsing map[string]bool        // points whose lapsing lock was notified
}

// New returns a monitor for o.
func New(o Options) *Monitor {
	if o.CheckEvery <= 0 {
		o.CheckEvery = time.Minute
	}
	if o.StatsEvery <= 0 {
		o.StatsEvery = 15 * time.Minute
	}
	if o.FullPercent <= 0 {
		o.FullPercent = 90
	}
	if o.LockWarning <= 0 {
		o.LockWarning = 7 * 24 * time.Hour
	}
	if o.Emitter == nil {
		o.Emitter = notify.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Monitor{o: o, cfg: o.Config, repos: o.Repositories, missed: map[catalog.VMRef]bool{}, full: map[string]bool{}, lapsing: map[string]bool{}}
}

// Reload makes the next checks use cfg (the policies, their RPOs) and
// watch repositories (the configuration in effect changed: the server's
// configuration objects). The statistics of a repository no longer
// watched leave the metrics; what was told of the others stays told.
func (m *Monitor) Reload(cfg *policy.Config, repositories []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, name := range m.repos {
		if !slices.Contains(repositories, name) {
			delete(m.full, name)
			if m.o.Metrics != nil {
				m.o.Metrics.DeleteRepository(name)
			}
		}
	}
	m.cfg, m.repos = cfg, repositories
}

// watched is the configuration and the repositories the checks use now.
func (m *Monitor) watched() (*policy.Config, []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cfg, m.repos
}

// Run checks at once, then every CheckEvery, and refreshes the
// statistics at once, then every StatsEvery, until ctx ends.
func (m *Monitor) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	loop := func(every time.Duration, what string, f func(context.Context) error) {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if err := f(ctx); err != nil && ctx.Err() == nil {
				m.o.Logger.Warn(what+" failed; trying again at the next check", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}
	wg.Add(2)
	go loop(m.o.CheckEvery, "checking the catalog", m.Check)
	go loop(m.o.StatsEvery, "refreshing repository statistics", m.RefreshStats)
	<-ctx.Done()
	return ctx.Err()
}

func (m *Monitor) notifying() bool { return m.o.Notifying == nil || m.o.Notifying() }

// Check reads the catalog: the metrics' state, and a notification for
// each VM newly outside its RPO (as the console's protection summary
// judges it: Options.Judge).
func (m *Monitor) Check(ctx context.Context) error {
	now := m.o.Now()
	cfg, repos := m.watched()
	if err := m.probeCatalog(ctx); err != nil {
		return err
	}
	st, misses, err := readState(ctx, m.o.Catalog, cfg, repos, m.o.Judge, now)
	if err != nil {
		return err
	}
	if m.o.Metrics != nil {
		m.o.Metrics.SetState(st)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	still := map[catalog.VMRef]bool{}
	var news []Miss
	for _, x := range misses {
		key := catalog.VMRef{Connection: x.Connection, ID: x.VMID}
		still[key] = true
		if !m.missed[key] && m.notifying() {
			news = append(news, x)
		}
	}
	for key := range m.missed {
		if !still[key] {
			delete(m.missed, key) // back within its RPO: the next miss is news again
		}
	}
	if err := m.lastPoints(ctx, news); err != nil {
		return err
	}
	var errs []error
	for _, x := range news {
		ev := notify.RPOMissed(notify.Subject{Policy: x.Policy, Connection: x.Connection, VM: x.VM}, x.RPO, short(x.LastPoint), x.LastTime, now)
		if err := m.o.Emitter.Emit(ctx, ev); err != nil {
			errs = append(errs, err)
			continue
		}
		m.missed[catalog.VMRef{Connection: x.Connection, ID: x.VMID}] = true
	}
	return errors.Join(errs...)
}

// probeTimeout bounds the catalog's answer to the probe: a catalog that
// takes longer is as good as unreachable to the operations waiting on it.
const probeTimeout = 10 * time.Second

// probeCatalog asks the catalog the cheapest question (/readyz's) and
// says in the metrics whether it answered.
func (m *Monitor) probeCatalog(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	_, err := m.o.Catalog.ListJobs(pctx, catalog.JobFilter{Limit: 1})
	if m.o.Metrics != nil && ctx.Err() == nil {
		m.o.Metrics.SetCatalogReachable(err == nil)
	}
	if err != nil {
		return fmt.Errorf("health: the catalog does not answer: %w", err)
	}
	return nil
}

// lastPoints names the newest point of each VM newly outside its RPO,
// for its notification: one grouped lookup of these VMs alone.
func (m *Monitor) lastPoints(ctx context.Context, misses []Miss) error {
	refs := make([]catalog.VMRef, 0, len(misses))
	for _, x := range misses {
		if !x.LastTime.IsZero() {
			refs = append(refs, catalog.VMRef{Connection: x.Connection, ID: x.VMID})
		}
	}
	if len(refs) == 0 {
		return nil
	}
	points, err := m.o.Catalog.NewestBackupPoints(ctx, refs)
	if err != nil {
		return fmt.Errorf("health: newest points of the VMs outside their RPO: %w", err)
	}
	newest := map[catalog.VMRef]catalog.BackupPoint{}
	for _, p := range points {
		newest[catalog.VMRef{Connection: p.Connection, ID: p.VMID}] = p
	}
	for i, x := range misses {
		if p, ok := newest[catalog.VMRef{Connection: x.Connection, ID: x.VMID}]; ok {
			misses[i].LastPoint, misses[i].LastTime = p.ID, p.Time
		}
	}
	return nil
}

func short(id string) string {
	if len(id) > 16 {
		return id[:16]
	}
	return id
}

// RefreshStats computes every watched repository's statistics (a walk of
// its manifests, index and store listing), sets the metrics, and tells of
// a repository past its threshold and of locks about to end.
func (m *Monitor) RefreshStats(ctx context.Context) error {
	var errs []error
	_, repos := m.watched()
	for _, name := range repos {
		if err := m.refreshOne(ctx, name); err != nil {
			errs = append(errs, fmt.Errorf("repository %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func (m *Monitor) refreshOne(ctx context.Context, name string) error {
	r, err := m.o.Open(ctx, name)
	if err != nil {
		return err
	}
	defer r.Close()
	st, err := stats.Compute(ctx, r)
	if err != nil {
		return err
	}
	snaps, err := r.Points(ctx, nil)
	if err != nil {
		return err
	}
	proven, err := bootverify.Proven(ctx, r)
	if err != nil {
		return err
	}
	now := m.o.Now()
	capacity := m.o.Capacity[name]
	if capacity == 0 && m.o.Location != nil {
		capacity = localCapacity(m.o.Location(name), st.Stored)
	}
	// Set under the lock Reload takes: figures of a repository deleted
	// from the configuration while they were computed are dropped, not
	// left in the metrics.
	m.mu.Lock()
	watched := slices.Contains(m.repos, name)
	if watched && m.o.Metrics != nil {
		m.o.Metrics.SetRepository(name, metrics.RepositoryStats{StoredBytes: st.Stored, LogicalBytes: st.Logical,
			DedupRatio: st.Dedup, CapacityBytes: capacity, DamagedChunks: len(r.Damage()), At: now,
			BootVerified: newestProven(snaps, proven)})
	}
	m.mu.Unlock()
	if !watched {
		return nil
	}
	var errs []error
	// The usage history: the console's trend and "estimated full" date
	// are drawn from these samples.
	if u, ok := catalog.UsageOf(m.o.Catalog); ok {
		errs = append(errs, u.AddUsageSample(ctx, catalog.UsageSample{Repository: r.Config().ID, At: now,
			StoredBytes: st.Stored, CapacityBytes: capacity}))
	}
	if capacity > 0 {
		pct := float64(st.Stored) * 100 / float64(capacity)
		m.mu.Lock()
		notified := m.full[name]
		m.full[name] = pct >= m.o.FullPercent && (notified || m.notifying())
		m.mu.Unlock()
		if pct >= m.o.FullPercent && !notified && m.notifying() {
			ev := notify.RepositoryNearlyFull(name, st.Stored, capacity, m.o.FullPercent, time.Time{}, now)
			if err := m.o.Emitter.Emit(ctx, ev); err != nil {
				m.mu.Lock()
				m.full[name] = false
				m.mu.Unlock()
				errs = append(errs, err)
			}
		}
	}
	errs = append(errs, m.checkLocks(ctx, snaps, name, now))
	return errors.Join(errs...)
}

// newestProven is, by VM name, the time of its newest point that passed
// boot verification.
func newestProven(snaps []*repo.Point, proven map[id.ID]bool) map[string]time.Time {
	out := map[string]time.Time{}
	for _, s := range snaps {
		if proven[s.ID] && s.Time.After(out[s.Source.VMName]) {
			out[s.Source.VMName] = s.Time
		}
	}
	return out
}

// checkLocks tells of points whose object lock ends within LockWarning.
func (m *Monitor) checkLocks(ctx context.Context, snaps []*repo.Point, name string, now time.Time) error {
	var errs []error
	for _, s := range snaps {
		until := s.RetainUntil
		if until.IsZero() || !until.After(now) || until.Sub(now) > m.o.LockWarning {
			continue
		}
		key := name + "/" + s.ID.String()
		m.mu.Lock()
		done := m.lapsing[key]
		m.mu.Unlock()
		if done || !m.notifying() {
			continue
		}
		subject := notify.Subject{Repository: name, VM: s.Source.VMName, Connection: s.Source.Connection, Policy: s.Tags["policy"]}
		ev := notify.LockLapsing(subject, s.ID.Short(), until, int(m.o.LockWarning/(24*time.Hour)), now)
		if err := m.o.Emitter.Emit(ctx, ev); err != nil {
			errs = append(errs, err)
			continue
		}
		m.mu.Lock()
		m.lapsing[key] = true
		m.mu.Unlock()
	}
	return errors.Join(errs...)
}

// localCapacity is what a repository in a directory may hold: what it
// holds plus its file system's free space (0 for S3 and on error).
func localCapacity(location string, stored int64) int64 {
	free, err := FreeBytes(location)
	if err != nil {
		return 0
	}
	return stored + free
}

// ErrNotLocal is FreeBytes' answer for a repository that is not in a
// directory (an object store tells no free space).
var ErrNotLocal = errors.New("not a directory: its store tells no free space")

// FreeBytes is the space left to a repository in a directory: its file
// system's blocks available to unprivileged users.
func FreeBytes(location string) (int64, error) {
	if location == "" || strings.Contains(location, "://") {
		return 0, ErrNotLocal
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(location, &fs); err != nil {
		return 0, err
	}
	return int64(fs.Bavail) * int64(fs.Bsize), nil
}
