package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/engine"
)

// A worker's metrics show its latency watch as coffer_worker_* series
// labelled by the worker: a throttled unit's rate while it is throttled,
// nothing once the watch has no datastore.
func TestWorkerHandlerShowsItsThrottling(t *testing.T) {
	var now []engine.DatastoreLatency
	h := WorkerHandler("kvm1", func() []engine.DatastoreLatency { return now })
	scrape := func() string {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		body, _ := io.ReadAll(rec.Body)
		return string(body)
	}
	now = []engine.DatastoreLatency{{Connection: "kvm", Datastore: "ds-001", Threshold: 5 * time.Millisecond, Latency: 50 * time.Millisecond,
		Sampled: true, Congested: true, Readers: []engine.LatencyReader{{Policy: "p", VM: "web", Rate: 65536}, {Policy: "p", VM: "idle"}}}}
	got := scrape()
	for _, want := range []string{
		`coffer_worker_read_rate_limit_bytes_per_second{connection="kvm",datastore="ds-001",policy="p",vm="web",worker="kvm1"} 65536`,
		`coffer_worker_datastore_congested{connection="kvm",datastore="ds-001",worker="kvm1"} 1`,
		`coffer_worker_datastore_latency_seconds{connection="kvm",datastore="ds-001",worker="kvm1"} 0.05`,
		`coffer_worker_datastore_latency_threshold_seconds{connection="kvm",datastore="ds-001",worker="kvm1"} 0.005`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the worker's scrape has no %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, `vm="idle"`) {
		t.Errorf("a reader not throttled has a rate series:\n%s", got)
	}
	now = nil
	if got := scrape(); strings.Contains(got, "coffer_worker_") {
		t.Errorf("series with no datastore watched:\n%s", got)
	}
}
