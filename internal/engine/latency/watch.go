// Package latency is the engine's latency-driven throttling (the
// latency-control section), shared by the engine's own tasks and the VM
// units a worker runs (internal/fleet).
package latency

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/engine/ratelimit"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/iolatency"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
)

// Latency-driven throttling (the latency-control section): while units
// read from a datastore the section names, one monitor per datastore
// samples its latency every interval and steps an iolatency.Controller,
// which sets the rate of a token bucket of each unit reading from it.
// The latency is the worst of what its sources saw over the interval:
// the datastore's block device (/proc/diskstats: everyone's I/O,
// production's and the backup's own), the disks on it of the VMs being
// backed up (their hypervisor session's counters: the guest's own view,
// copy-before-write included), and any source Options.LatencySources
// adds. The worst, not a mean: one VM whose writes wait is production
// hurting, however quiet the others are.

// Watch holds one process's datastore monitors: the engine's, or a
// worker's for the units it runs.
type Watch struct {
	extra func(connection, datastore string) []iolatency.Source

	mu       sync.Mutex
	monitors map[string]*dsMonitor // by connection/datastore
}

// NewWatch returns a watch; extra, when set, adds latency sources to a
// watched datastore beside its block device and the disks of the VMs
// being read: an array's own statistics, or a test's scripted latency.
func NewWatch(extra func(connection, datastore string) []iolatency.Source) *Watch {
	return &Watch{extra: extra, monitors: map[string]*dsMonitor{}}
}

// Unit is a unit about to read a VM's disks, as the watch sees it.
type Unit struct {
	Control    policy.LatencyControls // the configuration's section
	Connection string
	Policy, VM string
	Datastores []string // the VM's
	Shares     int      // the policy's shares of a congested datastore
	// Ceiling is the unit's static rate in bytes/s (0: none), where its
	// throttling starts and ends.
	Ceiling float64
	// Repository, when set, is the unit's write session: a local one on
	// a watched datastore's device is warned about.
	Repository *repo.Writer
	// Event records a line in the unit's log.
	Event func(level, kind, msg string, fields map[string]any)
}

// dsMonitor watches one datastore while tasks read from it.
type dsMonitor struct {
	w             *Watch
	key, conn, ds string
	cfg           policy.LatencyControl
	meters        []*iolatency.Meter // the device and the extra sources
	noDevice      string             // why the device is not watched
	device        *iolatency.Device  // the datastore's block device, when watched
	stop, done    chan struct{}
	mu            sync.Mutex // members, the controller and the state
	ctl           *iolatency.Controller
	members       map[*throttle]bool
	worst         string // the source of the last sample's latency
}

// throttle is one task's reads on one watched datastore: a token bucket
// in the task's limiter whose rate the monitor sets, counting the bytes
// that pass for the controller's throughput.
type throttle struct {
	m      *dsMonitor
	r      *iolatency.Reader
	bucket *rate.Limiter
	read   atomic.Int64
	vm     *iolatency.Meter // the session's disks on the datastore, under m.mu
	u      *Unit
	since  time.Time // when it engaged
	lowest float64
	nice   int // the CPU niceness its datastore's entry asks for (cpu-nice)
}

// WaitN counts what it lets through once it has: the throughput of
// reads granted, not of reads asked for (a backup asks for several MiB at
// once when it starts).
func (th *throttle) WaitN(ctx context.Context, n int) error {
	if err := (ratelimit.Limiter{th.bucket}).WaitN(ctx, n); err != nil {
		return err
	}
	th.read.Add(int64(n))
	return nil
}

// Throttles are one unit's, one per watched datastore of its VM.
type Throttles []*throttle

// Join registers a unit with the monitors of its VM's watched datastores
// (starting those not running yet).
func (w *Watch) Join(u Unit) Throttles {
	var out Throttles
	for _, ds := range u.Datastores {
		lc, ok := u.Control.For(ds)
		if !ok {
			continue
		}
		key := u.Connection + "/" + ds
		w.mu.Lock()
		m := w.monitors[key]
		if m == nil {
			m = w.start(key, u.Connection, ds, lc)
			w.monitors[key] = m
		}
		th := &throttle{m: m, bucket: rate.NewLimiter(rate.Inf, 1<<20), u: &u, nice: lc.Nice()}
		m.mu.Lock()
		th.r = m.ctl.Add(u.VM, u.Shares, u.Ceiling)
		m.members[th] = true
		m.mu.Unlock()
		w.mu.Unlock()
		if m.noDevice != "" {
			u.Event("info", "latency-throttle", fmt.Sprintf("datastore %s: latency watched through the VMs' disks only: %s", ds, m.noDevice),
				map[string]any{"datastore": ds})
		}
		if m.device != nil && sameDevice(u.Repository, *m.device) {
			u.Event("warn", "latency-throttle", fmt.Sprintf("datastore %s and the repository are on one device (%s): the repository's writes count as the datastore's latency, "+
				"so backups are slowed for congestion they cause themselves; keep repositories off the storage they protect", ds, m.device.Name),
				map[string]any{"datastore": ds, "device": m.device.Name})
		}
		if th.nice > 0 {
			u.Event("info", "latency-throttle", fmt.Sprintf("datastore %s: the backup reads, hashes, compresses and encrypts at CPU niceness %d, behind the VMs on this host (cpu-nice)", ds, th.nice),
				map[string]any{"datastore": ds, "cpu_nice": th.nice})
		}
		out = append(out, th)
	}
	return out
}

// sameDevice says whether the job's repository is a local one on dev.
func sameDevice(w *repo.Writer, dev iolatency.Device) bool {
	if w == nil {
		return false
	}
	local, ok := w.Repository().Store().(interface{ Root() string })
	if !ok {
		return false
	}
	d, err := iolatency.DeviceOf(local.Root())
	return err == nil && d.Major == dev.Major && d.Minor == dev.Minor
}

// Nice is the CPU niceness of the unit's pipeline: the lowest priority
// its watched datastores ask for (0: none watched, or all turned off).
func (ths Throttles) Nice() int {
	n := 0
	for _, th := range ths {
		n = max(n, th.nice)
	}
	return n
}

func (w *Watch) start(key, conn, ds string, lc policy.LatencyControl) *dsMonitor {
	m := &dsMonitor{w: w, key: key, conn: conn, ds: ds, cfg: lc, members: map[*throttle]bool{},
		stop: make(chan struct{}), done: make(chan struct{}),
		ctl: iolatency.NewController(iolatency.Settings{Threshold: time.Duration(lc.Threshold), Floor: float64(lc.MinRate)})}
	if !filepath.IsAbs(ds) {
		m.noDevice = "it is no directory of this host"
	} else if dev, err := iolatency.DeviceOf(ds); err != nil {
		m.noDevice = err.Error()
	} else {
		m.device = &dev
		m.meters = append(m.meters, iolatency.NewMeter(iolatency.Diskstats{Dev: dev}))
	}
	if w.extra != nil {
		for _, s := range w.extra(conn, ds) {
			m.meters = append(m.meters, iolatency.NewMeter(s))
		}
	}
	go m.run()
	return m
}

// Leave unregisters a unit's throttles, noting in its log one that ends
// throttled, and stops monitors nobody reads from any more.
func (ths Throttles) Leave() {
	for _, th := range ths {
		m := th.m
		m.w.mu.Lock()
		m.mu.Lock()
		m.ctl.Remove(th.r)
		delete(m.members, th)
		last := len(m.members) == 0
		if last {
			delete(m.w.monitors, m.key)
		}
		rate, since, lowest := th.r.Rate(), th.since, th.lowest
		m.mu.Unlock()
		m.w.mu.Unlock()
		if last {
			close(m.stop)
			<-m.done
		}
		if rate > 0 {
			th.u.Event("info", "latency-throttle", fmt.Sprintf("reads from datastore %s were throttled until the end (for %s, at %s at the lowest)",
				m.ds, time.Since(since).Round(time.Millisecond), mibps(lowest)), map[string]any{"datastore": m.ds, "throttled": false})
		}
	}
}

// Limit adds the throttles' buckets to a unit's limiter (nil: none).
func (ths Throttles) Limit(base backup.RateLimiter) backup.RateLimiter {
	if len(ths) == 0 {
		return base
	}
	var c chain
	if base != nil {
		c = append(c, base)
	}
	for _, th := range ths {
		c = append(c, th)
	}
	return c
}

// chain waits on each of its limiters in turn.
type chain []backup.RateLimiter

func (c chain) WaitN(ctx context.Context, n int) error {
	for _, l := range c {
		if err := l.WaitN(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// WatchSession adds the session's disks on each watched datastore to its
// monitor's sources, until the returned function removes them (before
// the session closes).
func (ths Throttles) WatchSession(s hypervisor.Session) func() {
	st, ok := s.(hypervisor.IOStatser)
	if !ok || len(ths) == 0 {
		return func() {}
	}
	for _, th := range ths {
		var keys []string
		for _, d := range s.Disks() {
			if d.Kind != hypervisor.KindMemory && d.Datastore == th.m.ds {
				keys = append(keys, d.Key)
			}
		}
		if len(keys) == 0 {
			continue
		}
		th.m.mu.Lock()
		th.vm = iolatency.NewMeter(iolatency.VMDisks{VM: th.u.VM, Stats: st, Keys: keys})
		th.m.mu.Unlock()
	}
	return func() {
		for _, th := range ths {
			th.m.mu.Lock()
			th.vm = nil
			th.m.mu.Unlock()
		}
	}
}

func (m *dsMonitor) run() {
	defer close(m.done)
	interval := time.Duration(m.cfg.Interval)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	last := time.Now()
	m.sample(interval) // the baselines
	for {
		select {
		case <-m.stop:
			return
		case now := <-tick.C:
			m.step(m.sample(interval), now.Sub(last))
			last = now
		}
	}
}

type sample struct {
	latency time.Duration
	ok      bool
	source  string
}

// sample reads every source once, each bounded by the interval.
func (m *dsMonitor) sample(interval time.Duration) sample {
	m.mu.Lock()
	meters := append([]*iolatency.Meter(nil), m.meters...)
	for th := range m.members {
		if th.vm != nil {
			meters = append(meters, th.vm)
		}
	}
	m.mu.Unlock()
	var s sample
	for _, mt := range meters {
		ctx, cancel := context.WithTimeout(context.Background(), interval)
		lat, ok, err := mt.Sample(ctx)
		cancel()
		if err == nil && ok && (!s.ok || lat > s.latency) {
			s = sample{latency: lat, ok: true, source: mt.Source().Name()}
		}
	}
	return s
}

// step feeds one interval to the controller, sets the buckets it changed
// and logs engagements and releases in the tasks' logs.
func (m *dsMonitor) step(s sample, elapsed time.Duration) {
	type note struct {
		u      *Unit
		level  string
		msg    string
		fields map[string]any
	}
	var notes []note
	m.mu.Lock()
	byReader := map[*iolatency.Reader]*throttle{}
	tp := map[*iolatency.Reader]float64{}
	for th := range m.members {
		byReader[th.r] = th
		tp[th.r] = float64(th.read.Swap(0)) / max(elapsed.Seconds(), 1e-3)
	}
	m.worst = s.source
	threshold := time.Duration(m.cfg.Threshold)
	for _, ch := range m.ctl.Step(s.latency, s.ok, tp) {
		th := byReader[ch.Reader]
		ratelimit.SetRate(th.bucket, policy.ByteRate(ch.To))
		limit := float64(th.bucket.Limit()) // what the bucket now lets through (0: unlimited)
		if th.bucket.Limit() == rate.Inf {
			limit = 0
		}
		fields := map[string]any{"datastore": m.ds, "latency_seconds": s.latency.Seconds(), "threshold_seconds": threshold.Seconds(),
			"rate_bytes_per_second": limit, "shares": ch.Reader.Shares, "throttled": ch.To > 0}
		switch {
		case ch.Engaged():
			th.since, th.lowest = time.Now(), ch.To
			notes = append(notes, note{th.u, "warn", fmt.Sprintf("reads slowed to %s: datastore %s is congested (latency %s over %s, worst at %s)",
				mibps(ch.To), m.ds, s.latency.Round(10*time.Microsecond), threshold, s.source), fields})
		case ch.Released():
			notes = append(notes, note{th.u, "info", fmt.Sprintf("reads back to full speed: datastore %s latency %s, under %s (throttled for %s, at %s at the lowest)",
				m.ds, s.latency.Round(10*time.Microsecond), threshold, time.Since(th.since).Round(time.Millisecond), mibps(th.lowest)), fields})
		default:
			th.lowest = math.Min(th.lowest, ch.To)
		}
	}
	m.mu.Unlock()
	for _, n := range notes {
		n.u.Event(n.level, "latency-throttle", n.msg, n.fields)
	}
}

func mibps(r float64) string { return fmt.Sprintf("%.1f MiB/s", r/(1<<20)) }

// Datastore is a watched datastore's state (metrics).
type Datastore struct {
	Connection, Datastore string
	Threshold             time.Duration
	// Latency is the last interval's, when Sampled (production completed
	// I/O in it); Source names where it was worst.
	Latency   time.Duration
	Sampled   bool
	Source    string
	Congested bool
	Readers   []Reader
}

// Reader is a unit reading from a watched datastore.
type Reader struct {
	Policy, VM string
	Shares     int
	// Rate is its read rate limit in bytes/s; 0: not throttled.
	Rate float64
}

// Datastores lists the datastores being watched now, for the metrics.
func (w *Watch) Datastores() []Datastore {
	w.mu.Lock()
	ms := make([]*dsMonitor, 0, len(w.monitors))
	for _, m := range w.monitors {
		ms = append(ms, m)
	}
	w.mu.Unlock()
	out := make([]Datastore, 0, len(ms))
	for _, m := range ms {
		m.mu.Lock()
		lat, ok := m.ctl.Latency()
		d := Datastore{Connection: m.conn, Datastore: m.ds, Threshold: time.Duration(m.cfg.Threshold), Latency: lat, Sampled: ok,
			Source: m.worst, Congested: m.ctl.Congested()}
		for th := range m.members {
			d.Readers = append(d.Readers, Reader{Policy: th.u.Policy, VM: th.u.VM, Shares: th.r.Shares, Rate: th.r.Rate()})
		}
		m.mu.Unlock()
		sort.Slice(d.Readers, func(i, j int) bool { return d.Readers[i].VM < d.Readers[j].VM })
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Connection+"/"+out[i].Datastore < out[j].Connection+"/"+out[j].Datastore
	})
	return out
}
