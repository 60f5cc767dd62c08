package metrics

import (
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// State is what the health monitor read from the catalog at At.
type State struct {
	At time.Time
	// Backups are the newest good point of each VM, by policy.
	Backups []VMBackup
	// PolicyLast is the end of each policy's newest fully successful run.
	PolicyLast map[string]time.Time
	// Running counts queued and running tasks by kind.
	Running map[string]int
	// VerifyLast and GCLast are the ends of the newest successful verify
	// and gc of each repository.
	VerifyLast, GCLast map[string]time.Time
	// RPO is the objective of each policy that sets one; OutsideRPO
	// counts, for every policy, the VMs it selects that are outside their
	// RPO; VMs counts the inventory's VMs by how they stand against their
	// RPO.
	RPO        map[string]time.Duration
	OutsideRPO map[string]int
	VMs        map[string]int
	// NotificationsPending counts, by target, the deliveries waiting to
	// be sent; NotificationsFailed those given up in the last 24 hours.
	NotificationsPending, NotificationsFailed map[string]int
	// Replicas are the standbys replications keep, each with the
	// instant its newest point equals and its replication's RPO.
	Replicas []Replica
}

// Replica is a standby as the catalog last recorded it.
type Replica struct {
	Replication, VM string
	SourceTime      time.Time // zero: no point yet
	RPO             time.Duration
}

// VMBackup is a VM's newest good point made by a policy.
type VMBackup struct {
	Connection, VM, Policy string
	At                     time.Time
}

// SetState replaces the catalog-derived gauges: series of VMs, policies
// and repositories that are gone disappear.
func (m *Metrics) SetState(s State) {
	m.setMu.Lock()
	defer m.setMu.Unlock()
	defer m.render()
	m.backupLast.Reset()
	for _, b := range s.Backups {
		m.backupLast.WithLabelValues(b.Connection, b.VM, b.Policy).Set(seconds(b.At))
	}
	setTimes(m.policyLast, s.PolicyLast)
	setTimes(m.verifyLast, s.VerifyLast)
	setTimes(m.gcLast, s.GCLast)
	m.tasksRunning.Reset()
	for _, kind := range []string{catalog.KindBackupPolicy, catalog.KindRestore, catalog.KindVerify, catalog.KindGC,
		catalog.KindForget, catalog.KindCopy} {
		m.tasksRunning.WithLabelValues(kind).Set(0) // a zero series to alert on, not an absent one
	}
	for kind, n := range s.Running {
		m.tasksRunning.WithLabelValues(kind).Set(float64(n))
	}
	m.rpoSeconds.Reset()
	for p, rpo := range s.RPO {
		m.rpoSeconds.WithLabelValues(p).Set(rpo.Seconds())
	}
	m.outsideRPO.Reset()
	for p, n := range s.OutsideRPO {
		m.outsideRPO.WithLabelValues(p).Set(float64(n))
	}
	m.inventoryVMs.Reset()
	for standing, n := range s.VMs {
		m.inventoryVMs.WithLabelValues(standing).Set(float64(n))
	}
	m.replicaLag.Reset()
	m.replicaRPO.Reset()
	for _, r := range s.Replicas {
		m.replicaRPO.WithLabelValues(r.Replication).Set(r.RPO.Seconds())
		lag := s.At.Sub(r.SourceTime).Seconds()
		if r.SourceTime.IsZero() {
			lag = math.Inf(1) // no point at all: as far behind as can be
		}
		m.replicaLag.WithLabelValues(r.Replication, r.VM).Set(lag)
	}
	setCounts(m.notifyPending, s.NotificationsPending)
	setCounts(m.notifyFailed, s.NotificationsFailed)
}

func setCounts(g *prometheus.GaugeVec, counts map[string]int) {
	g.Reset()
	for k, n := range counts {
		g.WithLabelValues(k).Set(float64(n))
	}
}

func setTimes(g *prometheus.GaugeVec, times map[string]time.Time) {
	g.Reset()
	for k, t := range times {
		g.WithLabelValues(k).Set(seconds(t))
	}
}

// RepositoryStats are a repository's figures from its statistics.
type RepositoryStats struct {
	StoredBytes, LogicalBytes int64
	DedupRatio                float64
	// CapacityBytes is 0 when unknown.
	CapacityBytes int64
	DamagedChunks int
	At            time.Time
	// BootVerified is, by VM name, the time of its newest point that
	// passed boot verification.
	BootVerified map[string]time.Time
}

// SetRepository sets a repository's statistics.
func (m *Metrics) SetRepository(name string, s RepositoryStats) {
	m.setMu.Lock()
	defer m.setMu.Unlock()
	defer m.render()
	m.repoStored.WithLabelValues(name).Set(float64(s.StoredBytes))
	m.repoLogical.WithLabelValues(name).Set(float64(s.LogicalBytes))
	m.repoDedup.WithLabelValues(name).Set(s.DedupRatio)
	if s.CapacityBytes > 0 {
		m.repoCapacity.WithLabelValues(name).Set(float64(s.CapacityBytes))
	} else {
		m.repoCapacity.DeleteLabelValues(name)
	}
	m.repoDamaged.WithLabelValues(name).Set(float64(s.DamagedChunks))
	m.repoStatsAt.WithLabelValues(name).Set(seconds(s.At))
	m.bootVerified.DeletePartialMatch(prometheus.Labels{"repository": name})
	for vm, t := range s.BootVerified {
		m.bootVerified.WithLabelValues(name, vm).Set(seconds(t))
	}
}

// DeleteRepository removes a repository's statistics: it is no longer
// watched (deleted from the configuration in effect), and its last
// figures would otherwise be scraped as current.
func (m *Metrics) DeleteRepository(name string) {
	m.setMu.Lock()
	defer m.setMu.Unlock()
	defer m.render()
	for _, g := range []*prometheus.GaugeVec{m.repoStored, m.repoLogical, m.repoDedup, m.repoCapacity, m.repoDamaged, m.repoStatsAt} {
		g.DeleteLabelValues(name)
	}
	m.bootVerified.DeletePartialMatch(prometheus.Labels{"repository": name})
}

// ObserveTask records a task this process finished: its count by kind and
// status, and for a policy's run the duration and bytes of each VM's
// backup, for a restore its duration and bytes.
func (m *Metrics) ObserveTask(j catalog.Job, vms []catalog.Task) {
	m.tasksFinished.WithLabelValues(j.Kind, string(j.Status)).Inc()
	switch j.Kind {
	case catalog.KindBackupPolicy:
		for _, t := range vms {
			if t.Status != catalog.StatusSuccess || t.StartedAt.IsZero() || t.FinishedAt.IsZero() {
				continue
			}
			m.backupDuration.WithLabelValues(j.Policy).Observe(t.FinishedAt.Sub(t.StartedAt).Seconds())
			m.backupBytes.WithLabelValues(j.Policy).Observe(float64(t.BytesRead))
		}
	case catalog.KindBackupVM, catalog.KindBackupDisk:
		if j.Status == catalog.StatusSuccess {
			m.backupDuration.WithLabelValues("").Observe(j.FinishedAt.Sub(j.StartedAt).Seconds())
			m.backupBytes.WithLabelValues("").Observe(float64(j.Progress.BytesDone))
		}
	case catalog.KindRestore, catalog.KindRestoreVM, catalog.KindRestoreFiles:
		if j.Status == catalog.StatusSuccess {
			m.restoreDuration.WithLabelValues(j.Kind).Observe(j.FinishedAt.Sub(j.StartedAt).Seconds())
			m.restoreBytes.WithLabelValues(j.Kind).Observe(float64(j.Progress.BytesDone))
		}
	}
}
