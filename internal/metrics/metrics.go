// Package metrics exposes coffer's state to Prometheus (/metrics). A
// scrape reads only what is in memory: gauges that the health monitor
// sets from the catalog on its schedule (last good backups, RPO, tasks
// running, last verify and gc) and from the repository statistics it
// refreshes (sizes, dedup ratio, damage), histograms observed as tasks
// end, and the engine's limit slots, read at once under the engine's own
// lock. No scrape walks a repository or queries the catalog.
//
// The monitor's gauges hold a series per VM (10,000 at fleet scale), and
// gathering and encoding them took a scrape 40-70 ms of CPU: they are
// rendered once each time the monitor sets them (render.go), and a
// scrape copies that text beside what it gathers of the rest.
//
// Names follow Prometheus' conventions: the coffer_ prefix, base units
// (seconds, bytes), _total for counters, _timestamp_seconds for times
// (alert on time() - metric).
package metrics

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
)

// Metrics holds coffer's collectors in two registries of their own.
type Metrics struct {
	// live is gathered at every scrape: the histograms and counters of
	// tasks, the limit slots, the leader flag, Go's and the process's
	// collectors.
	live *prometheus.Registry
	// set holds the gauges the health monitor sets (SetState,
	// SetRepository), rendered into rendered each time it does, under
	// setMu so that the rendering follows the last change.
	set      *prometheus.Registry
	setMu    sync.Mutex
	rendered atomic.Pointer[rendering]

	backupLast      *prometheus.GaugeVec
	policyLast      *prometheus.GaugeVec
	backupDuration  *prometheus.HistogramVec
	backupBytes     *prometheus.HistogramVec
	restoreDuration *prometheus.HistogramVec
	restoreBytes    *prometheus.HistogramVec
	repoStored      *prometheus.GaugeVec
	repoLogical     *prometheus.GaugeVec
	repoDedup       *prometheus.GaugeVec
	repoCapacity    *prometheus.GaugeVec
	repoDamaged     *prometheus.GaugeVec
	repoStatsAt     *prometheus.GaugeVec
	bootVerified    *prometheus.GaugeVec
	tasksRunning    *prometheus.GaugeVec
	tasksFinished   *prometheus.CounterVec
	offloadBytes    *prometheus.CounterVec
	offloadOps      *prometheus.CounterVec
	verifyLast      *prometheus.GaugeVec
	gcLast          *prometheus.GaugeVec
	outsideRPO      *prometheus.GaugeVec
	rpoSeconds      *prometheus.GaugeVec
	replicaLag      *prometheus.GaugeVec
	replicaRPO      *prometheus.GaugeVec
	inventoryVMs    *prometheus.GaugeVec
	leader          prometheus.Gauge
	workers         atomic.Pointer[[]catalog.Worker] // SetWorkers; read at each scrape
	serving         servingGauges
	notifyPending   *prometheus.GaugeVec
	notifyFailed    *prometheus.GaugeVec

	mu      sync.Mutex
	slots   func() []engine.Slot
	latency func() []engine.DatastoreLatency
}

// New creates the collectors, with Go's and the process's own.
func New() *Metrics {
	m := &Metrics{live: prometheus.NewRegistry(), set: prometheus.NewRegistry()}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
		m.set.MustRegister(g)
		return g
	}
	hist := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
		m.live.MustRegister(h)
		return h
	}
	durations := []float64{1, 5, 15, 60, 300, 900, 1800, 3600, 7200, 14400, 28800, 86400}
	sizes := prometheus.ExponentialBuckets(1<<20, 4, 12) // 1 MiB .. 4 TiB
	m.backupLast = gauge("coffer_backup_last_success_timestamp_seconds",
		"Time of the newest good backup point of a VM, by the policy that made it (\"\" for backups run by hand).", "connection", "vm", "policy")
	m.policyLast = gauge("coffer_policy_last_success_timestamp_seconds",
		"End of the newest run of a policy in which every VM was backed up.", "policy")
	m.backupDuration = hist("coffer_backup_duration_seconds", "Duration of one VM's backup (policy runs; disk and VM backups run by hand with policy=\"\").", durations, "policy")
	m.backupBytes = hist("coffer_backup_read_bytes", "Bytes read from the hypervisor by one VM's backup.", sizes, "policy")
	m.restoreDuration = hist("coffer_restore_duration_seconds", "Duration of a restore, by kind: restore (disks), restore-vm, restore-files.", durations, "kind")
	m.restoreBytes = hist("coffer_restore_bytes", "Bytes written by a restore of disks, by kind.", sizes, "kind")
	m.repoStored = gauge("coffer_repository_stored_bytes", "Bytes the repository holds in its store (refreshed every stats-every).", "repository")
	m.repoLogical = gauge("coffer_repository_logical_bytes", "Sum of the disk sizes of every backup point.", "repository")
	m.repoDedup = gauge("coffer_repository_dedup_ratio", "Non-zero data referenced over the unique data stored (x:1).", "repository")
	m.repoCapacity = gauge("coffer_repository_capacity_bytes",
		"What the repository may hold: its configured capacity, else what it holds plus its file system's free space; absent when unknown (S3 without capacity).", "repository")
	m.repoDamaged = gauge("coffer_repository_damaged_chunks", "Chunks verify recorded as damaged and no repair has mended.", "repository")
	m.repoStatsAt = gauge("coffer_repository_stats_timestamp_seconds", "When the repository's statistics were computed.", "repository")
	m.bootVerified = gauge("coffer_vm_boot_verified_point_timestamp_seconds",
		"Time of the VM's newest backup point whose boot verification passed (refreshed every stats-every).", "repository", "vm")
	m.tasksRunning = gauge("coffer_tasks_running", "Tasks queued or running in the catalog, on every server sharing it.", "kind")
	m.tasksFinished = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coffer_tasks_finished_total",
		Help: "Tasks this process finished, by kind and status (success, partial, failed, cancelled)."}, []string{"kind", "status"})
	m.live.MustRegister(m.tasksFinished)
	m.offloadBytes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coffer_offload_bytes_total",
		Help: "Bytes a storage primitive handled in this process: zero (a restore's zero bytes) by offloaded (holes of a sparse file, a device's zeroing) or fallback (written as zeros); copy (the copies of restore --copies, and coffer copy's data) by offloaded (cloned by the filesystem, or whole packs copied server-side by S3) or fallback (copied through the host, or chunks streamed through coffer)."},
		[]string{"primitive", "path"})
	m.live.MustRegister(m.offloadBytes)
	for _, primitive := range []string{"zero", "copy"} {
		for _, path := range []string{"offloaded", "fallback"} {
			m.offloadBytes.WithLabelValues(primitive, path) // at 0 from the start, for rate()
		}
	}
	m.offloadOps = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coffer_offload_operations_total",
		Help: "Uses of a storage primitive without a byte count in this process: test-and-set (taking the maintenance lease, for gc) by offloaded (the storage evaluates the condition atomically: S3 conditional writes, the local store's link(2) under flock) or fallback (an S3 server that ignores the conditions: HEAD, PUT, HEAD)."},
		[]string{"primitive", "path"})
	m.live.MustRegister(m.offloadOps)
	for _, path := range []string{"offloaded", "fallback"} {
		m.offloadOps.WithLabelValues("test-and-set", path)
	}
	m.verifyLast = gauge("coffer_verify_last_success_timestamp_seconds", "End of the newest verify of the repository that found nothing wrong.", "repository")
	m.gcLast = gauge("coffer_gc_last_success_timestamp_seconds", "End of the newest successful garbage collection of the repository.", "repository")
	m.outsideRPO = gauge("coffer_vms_outside_rpo",
		"VMs of the inventory the policy selects whose newest good point is older than their RPO (the strictest rpo of the policies selecting them, 24h when none sets one); every policy has a series.", "policy")
	m.rpoSeconds = gauge("coffer_policy_rpo_seconds", "The policy's recovery point objective, its rpo (only policies that set one).", "policy")
	m.replicaLag = gauge("coffer_replica_lag_seconds",
		"How far a standby a replication keeps lags behind its VM: the time since the instant of the backup point its newest restore point equals (+Inf before its first point), as of the monitor's last check.", "replication", "vm")
	m.replicaRPO = gauge("coffer_replica_rpo_seconds", "A replication's recovery point objective: its rpo, an hour when it sets none.", "replication")
	m.inventoryVMs = gauge("coffer_inventory_vms",
		"VMs of the inventory by how they stand against their RPO: no-policy, no-point, outside-rpo, within-rpo (the console's protection summary).", "protection")
	m.live.MustRegister(newWorkerCollector(&m.workers))
	m.serving = newServingGauges(m.live)
	m.notifyPending = gauge("coffer_notification_deliveries_pending",
		"Notification deliveries waiting to be sent or retried, by target (at most 10000 counted): a backlog that grows means a target does not answer.", "target")
	m.notifyFailed = gauge("coffer_notification_deliveries_failed",
		"Notification deliveries given up in the last 24 hours, by target (at most 10000 counted): what they said reached nobody there.", "target")
	m.leader = prometheus.NewGauge(prometheus.GaugeOpts{Name: "coffer_schedules_leader",
		Help: "1 when this server runs the scheduled jobs (holds the schedules' lease), else 0."})
	m.live.MustRegister(m.leader)
	m.live.MustRegister(&slotCollector{m: m,
		inUse: prometheus.NewDesc("coffer_limit_slots_in_use", "Slots of one of the engine's limit pools in use: global, host:C/H, datastore:C/D, group:G, repo:R, policy:P, library:L (a media library's drives written at once).", []string{"pool"}, nil),
		size:  prometheus.NewDesc("coffer_limit_slots", "Slots of one of the engine's limit pools (its capacity).", []string{"pool"}, nil)})
	m.live.MustRegister(newLatencyCollector(serverLatencyNames, nil, m.engineLatency))
	m.live.MustRegister(newBuildInfo())
	m.live.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.render()
	return m
}

// AddOffload counts bytes a storage primitive handled by one path
// (offloaded or fallback).
func (m *Metrics) AddOffload(primitive, path string, bytes int64) {
	m.offloadBytes.WithLabelValues(primitive, path).Add(float64(bytes))
}

// AddOffloadOp counts one use of a storage primitive by one path
// (offloaded or fallback).
func (m *Metrics) AddOffloadOp(primitive, path string) {
	m.offloadOps.WithLabelValues(primitive, path).Inc()
}

// Gatherer gathers every metric, the monitor's gauges as last rendered:
// what a scrape serves, for tests and for other exporters.
func (m *Metrics) Gatherer() prometheus.Gatherer {
	return prometheus.Gatherers{m.live, prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		return m.rendered.Load().families, nil
	})}
}

// SetSlots says where the engine's limit slots are read (nil: none).
func (m *Metrics) SetSlots(f func() []engine.Slot) {
	m.mu.Lock()
	m.slots = f
	m.mu.Unlock()
}

// SetLeader says whether this server runs the schedules.
func (m *Metrics) SetLeader(held bool) {
	if held {
		m.leader.Set(1)
	} else {
		m.leader.Set(0)
	}
}

type slotCollector struct {
	m           *Metrics
	inUse, size *prometheus.Desc
}

func (c *slotCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.inUse; ch <- c.size }

func (c *slotCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	f := c.m.slots
	c.m.mu.Unlock()
	if f == nil {
		return
	}
	for _, s := range f() {
		ch <- prometheus.MustNewConstMetric(c.inUse, prometheus.GaugeValue, float64(s.InUse), s.Key)
		ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(s.Size), s.Key)
	}
}

func seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
