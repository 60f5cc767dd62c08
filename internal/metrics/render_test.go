package metrics

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// scrapeAs serves one scrape with these request headers and query, and
// decodes coffer's families from it.
func scrapeAs(t *testing.T, m *Metrics, query string, header map[string]string) (map[string]*dto.MetricFamily, http.Header) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics"+query, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape %q %v: %d %s", query, header, rec.Code, rec.Body)
	}
	var body io.Reader = rec.Body
	if rec.Header().Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		body = gz
	}
	out := map[string]*dto.MetricFamily{}
	dec := expfmt.NewDecoder(body, expfmt.ResponseFormat(rec.Header()))
	for {
		var f dto.MetricFamily
		err := dec.Decode(&f)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("scrape %q %v: %v", query, header, err)
		}
		if strings.HasPrefix(f.GetName(), "coffer_") {
			if out[f.GetName()] != nil {
				t.Fatalf("scrape %q %v: %s twice", query, header, f.GetName())
			}
			out[f.GetName()] = &f
		}
	}
	return out, rec.Header()
}

// TestScrapeServesTheLastState: whatever the format and compression a
// scraper asks for, a scrape serves the monitor's gauges as last set
// (rendered when set, not gathered per scrape) beside the live
// collectors, each family once; a scrape by name serves that family
// alone.
func TestScrapeServesTheLastState(t *testing.T) {
	m := New()
	now := time.Unix(1_764_000_000, 0)
	state := func(vms int) State {
		s := State{At: now, VMs: map[string]int{"within-rpo": vms, "outside-rpo": 1}, OutsideRPO: map[string]int{"nightly": 1},
			RPO: map[string]time.Duration{"nightly": 26 * time.Hour}}
		for i := range vms {
			s.Backups = append(s.Backups, VMBackup{Connection: "vc", VM: fmt.Sprintf("vm-%03d", i), Policy: "nightly", At: now})
		}
		return s
	}
	m.SetState(state(300))
	m.SetRepository("r", RepositoryStats{StoredBytes: 7, At: now})
	m.ObserveTask(catalog.Job{Kind: catalog.KindRestore, Status: catalog.StatusSuccess, StartedAt: now, FinishedAt: now.Add(time.Second)}, nil)
	m.SetState(state(200)) // the gone VMs' series go

	want, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	wanted := map[string]*dto.MetricFamily{}
	for _, f := range want {
		if strings.HasPrefix(f.GetName(), "coffer_") {
			wanted[f.GetName()] = f
		}
	}
	if n := len(wanted["coffer_backup_last_success_timestamp_seconds"].GetMetric()); n != 200 {
		t.Fatalf("%d last-success series after the second state, want 200", n)
	}
	for _, c := range []struct {
		name   string
		header map[string]string
		format expfmt.FormatType
	}{
		{"text", nil, expfmt.TypeTextPlain},
		{"text, gzip", map[string]string{"Accept-Encoding": "gzip"}, expfmt.TypeTextPlain},
		{"text, gzip refused", map[string]string{"Accept-Encoding": "gzip;q=0"}, expfmt.TypeTextPlain},
		{"Prometheus' own Accept", map[string]string{"Accept": "text/plain;version=0.0.4;q=0.5,*/*;q=0.1", "Accept-Encoding": "gzip"},
			expfmt.TypeTextPlain},
		{"protocol buffers", map[string]string{"Accept": string(expfmt.NewFormat(expfmt.TypeProtoDelim))}, expfmt.TypeProtoDelim},
	} {
		got, h := scrapeAs(t, m, "", c.header)
		if f := expfmt.ResponseFormat(h).FormatType(); f != c.format {
			t.Errorf("%s: served as %v, want %v", c.name, h.Get("Content-Type"), c.format)
		}
		gz := h.Get("Content-Encoding") == "gzip"
		if wantGz := strings.HasPrefix(c.header["Accept-Encoding"], "gzip") && !strings.Contains(c.header["Accept-Encoding"], "q=0"); gz != wantGz {
			t.Errorf("%s: gzip %v, want %v", c.name, gz, wantGz)
		}
		if len(got) != len(wanted) {
			t.Errorf("%s: %d coffer families, want %d", c.name, len(got), len(wanted))
		}
		for name, f := range wanted {
			if !sameFamily(got[name], f) {
				t.Errorf("%s: %s differs:\n%v\nwant\n%v", c.name, name, got[name], f)
			}
		}
	}
	byName, _ := scrapeAs(t, m, "?name[]=coffer_inventory_vms", nil)
	if len(byName) != 1 || !sameFamily(byName["coffer_inventory_vms"], wanted["coffer_inventory_vms"]) {
		t.Errorf("scrape by name: %v", byName)
	}
}

// sameFamily compares two families as the text format shows them: the
// format carries no creation times, and a histogram's +Inf bucket is
// explicit in it.
func sameFamily(a, b *dto.MetricFamily) bool {
	if a == nil || b == nil {
		return a == b
	}
	var x, y strings.Builder
	if _, err := expfmt.MetricFamilyToText(&x, a); err != nil {
		return false
	}
	if _, err := expfmt.MetricFamilyToText(&y, b); err != nil {
		return false
	}
	return x.String() == y.String()
}

// TestScrapesWhileTheMonitorSets: scrapes served while the monitor sets
// its gauges each serve one whole state, never a mix of two (run with
// -race: the rendering is swapped, never written while read).
func TestScrapesWhileTheMonitorSets(t *testing.T) {
	m := New()
	now := time.Unix(1_764_000_000, 0)
	state := func(vms int) State {
		s := State{At: now, VMs: map[string]int{"within-rpo": vms}}
		for i := range vms {
			s.Backups = append(s.Backups, VMBackup{Connection: "vc", VM: fmt.Sprintf("vm-%03d", i), Policy: "nightly", At: now})
		}
		return s
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 50 {
			m.SetState(state(100 + i%2*50))
			m.SetRepository("r", RepositoryStats{StoredBytes: int64(i), At: now})
		}
	}()
	for {
		fams, _ := scrapeAs(t, m, "", map[string]string{"Accept-Encoding": "gzip"})
		series := len(fams["coffer_backup_last_success_timestamp_seconds"].GetMetric())
		counted := fams["coffer_inventory_vms"].GetMetric()
		if series > 0 && (len(counted) != 1 || int(counted[0].GetGauge().GetValue()) != series) {
			t.Fatalf("a scrape mixed two states: %d series, counts %v", series, counted)
		}
		select {
		case <-done:
			return
		default:
		}
	}
}
