package metrics

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
)

// TestDocumentedMetricsExist: every coffer_ metric that docs/metrics.md
// lists and docs/alerts.yml uses is one this package exposes, and every
// one it exposes is documented.
func TestDocumentedMetricsExist(t *testing.T) {
	m := New()
	// One sample of each, so that every vector shows in a scrape.
	now := time.Now()
	m.SetState(State{At: now, Backups: []VMBackup{{Connection: "c", VM: "v", Policy: "p", At: now}},
		PolicyLast: map[string]time.Time{"p": now}, Running: map[string]int{"gc": 1},
		VerifyLast: map[string]time.Time{"r": now}, GCLast: map[string]time.Time{"r": now},
		RPO: map[string]time.Duration{"p": time.Hour}, OutsideRPO: map[string]int{"p": 1}, VMs: map[string]int{"outside-rpo": 1}})
	m.SetRepository("r", RepositoryStats{StoredBytes: 1, CapacityBytes: 2, At: now, BootVerified: map[string]time.Time{"v": now}})
	m.ObserveTask(catalog.Job{Kind: catalog.KindBackupPolicy, Policy: "p", Status: catalog.StatusSuccess},
		[]catalog.Task{{Status: catalog.StatusSuccess, StartedAt: now, FinishedAt: now.Add(time.Second), BytesRead: 10}})
	m.ObserveTask(catalog.Job{Kind: catalog.KindRestore, Status: catalog.StatusSuccess, StartedAt: now, FinishedAt: now}, nil)
	m.SetSlots(func() []engine.Slot { return []engine.Slot{{Key: "global", InUse: 1, Size: 4}} })
	m.SetLatency(func() []engine.DatastoreLatency {
		return []engine.DatastoreLatency{{Connection: "c", Datastore: "/srv/vms", Threshold: 30 * time.Millisecond, Latency: 45 * time.Millisecond,
			Sampled: true, Congested: true, Readers: []engine.LatencyReader{{Policy: "p", VM: "v", Rate: 4 << 20}}}}
	})
	fams, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	exposed := map[string]bool{}
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "coffer_") {
			exposed[f.GetName()] = true
		}
	}
	name := regexp.MustCompile(`coffer_[a-z_]+[a-z]`)
	for _, doc := range []string{"../../docs/metrics.md", "../../docs/alerts.yml"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		used := map[string]bool{}
		for _, n := range name.FindAllString(string(b), -1) {
			n = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_count"), "_sum")
			used[n] = true
			if !exposed[n] {
				t.Errorf("%s names %s, which is not exposed", doc, n)
			}
		}
		if strings.HasSuffix(doc, ".md") {
			for n := range exposed {
				if !used[n] {
					t.Errorf("%s is exposed but not documented in %s", n, doc)
				}
			}
		}
	}
}

// The offload counters add what each path handled, and both paths of a
// primitive exist from the start.
func TestOffloadBytesAddUp(t *testing.T) {
	m := New()
	m.AddOffload("zero", "offloaded", 5<<20)
	m.AddOffload("zero", "offloaded", 1<<20)
	m.AddOffload("copy", "fallback", 3<<20)
	fams, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "coffer_offload_bytes_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			labels := ""
			for _, l := range s.GetLabel() {
				labels += l.GetName() + "=" + l.GetValue() + " "
			}
			got[labels] = s.GetCounter().GetValue()
		}
	}
	if got["path=offloaded primitive=zero "] != 6<<20 || got["path=fallback primitive=zero "] != 0 ||
		got["path=fallback primitive=copy "] != 3<<20 || got["path=offloaded primitive=copy "] != 0 || len(got) != 4 {
		t.Fatalf("offload counters: %v", got)
	}
}
