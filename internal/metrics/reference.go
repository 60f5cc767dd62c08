package metrics

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
)

// Reference is the Markdown table of every coffer_ metric, as a scrape
// shows it: name, type, labels and help text. docs/reference/metrics.md
// is generated from it, so the reference cannot drift from the code.
func Reference() (string, error) {
	// A worker's own (WorkerHandler), without the Go and process
	// metrics both have.
	worker := prometheus.NewRegistry()
	worker.MustRegister(newLatencyCollector(workerLatencyNames, prometheus.Labels{"worker": "kvm1"}, sampleLatency))
	fams, err := prometheus.Gatherers{withOneSampleEach().Gatherer(), worker}.Gather()
	if err != nil {
		return "", err
	}
	sort.Slice(fams, func(i, j int) bool { return fams[i].GetName() < fams[j].GetName() })
	var b strings.Builder
	b.WriteString("| metric | type | labels | help |\n|---|---|---|---|\n")
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "coffer_") {
			continue
		}
		var labels []string
		if len(f.GetMetric()) > 0 {
			for _, l := range f.GetMetric()[0].GetLabel() {
				labels = append(labels, "`"+l.GetName()+"`")
			}
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.GetName(), strings.ToLower(f.GetType().String()),
			strings.Join(labels, ", "), strings.ReplaceAll(f.GetHelp(), "|", `\|`))
	}
	return b.String(), nil
}

// withOneSampleEach returns collectors holding one series of every
// vector, so that a gathering shows each metric with its labels (a
// vector without a series is not gathered).
func withOneSampleEach() *Metrics {
	m := New()
	now := time.Now()
	m.SetState(State{At: now, Backups: []VMBackup{{Connection: "c", VM: "v", Policy: "p", At: now}},
		PolicyLast: map[string]time.Time{"p": now}, Running: map[string]int{"gc": 1},
		VerifyLast: map[string]time.Time{"r": now}, GCLast: map[string]time.Time{"r": now},
		RPO: map[string]time.Duration{"p": time.Hour}, OutsideRPO: map[string]int{"p": 1}, VMs: map[string]int{"outside-rpo": 1},
		NotificationsPending: map[string]int{"ops-mail": 1}, NotificationsFailed: map[string]int{"ops-mail": 1},
		Replicas: []Replica{{Replication: "dr", VM: "v", SourceTime: now.Add(-time.Minute), RPO: time.Hour}}})
	m.SetCatalogReachable(true)
	m.SetCertificateExpiry(now.Add(90 * 24 * time.Hour))
	m.SetRepository("r", RepositoryStats{StoredBytes: 1, CapacityBytes: 2, At: now, BootVerified: map[string]time.Time{"v": now}})
	m.ObserveTask(catalog.Job{Kind: catalog.KindBackupPolicy, Policy: "p", Status: catalog.StatusSuccess},
		[]catalog.Task{{Status: catalog.StatusSuccess, StartedAt: now, FinishedAt: now.Add(time.Second), BytesRead: 10}})
	m.ObserveTask(catalog.Job{Kind: catalog.KindRestore, Status: catalog.StatusSuccess, StartedAt: now, FinishedAt: now}, nil)
	m.SetWorkers([]catalog.Worker{{Name: "kvm1", State: catalog.WorkerReady, Slots: 4, HeartbeatAt: now}})
	m.SetSlots(func() []engine.Slot { return []engine.Slot{{Key: "global", InUse: 1, Size: 4}} })
	m.SetLatency(sampleLatency)
	return m
}

// sampleLatency is one congested datastore with a throttled reader.
func sampleLatency() []engine.DatastoreLatency {
	return []engine.DatastoreLatency{{Connection: "c", Datastore: "/srv/vms", Threshold: 30 * time.Millisecond, Latency: 45 * time.Millisecond,
		Sampled: true, Congested: true, Readers: []engine.LatencyReader{{Policy: "p", VM: "v", Rate: 4 << 20}}}}
}
