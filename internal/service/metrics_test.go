package service_test

import (
	"context"
	"crypto/rand"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/metrics"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/backupops"
	"github.com/coffer-backup/coffer/internal/service/fleetops"
	"github.com/coffer-backup/coffer/internal/service/operations"
	"github.com/coffer-backup/coffer/internal/service/repoops"
	"github.com/coffer-backup/coffer/internal/service/restoreops"
	"github.com/coffer-backup/coffer/internal/service/servicetest"
)

const metricsFleet = `
connections:
  - {name: lab, kind: fake, options: {seed: 11, vms: 3, hosts: 1, datastores: 1, disk-size: 256KiB}}
policies:
  - name: web
    connection: lab
    schedule: "0 22 * * *"
    rpo: 26h
`

// scrape serves the metrics once and parses them.
func scrape(t *testing.T, m *metrics.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// value finds the sample of a family whose labels include want; for a
// histogram it returns the count and the sum.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, float64) {
	t.Helper()
	if fams[name] == nil {
		t.Fatalf("no metric %s", name)
	}
	if m := find(fams, name, want); m != nil {
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), 0
		case m.Counter != nil:
			return m.Counter.GetValue(), 0
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), m.Histogram.GetSampleSum()
		}
	}
	t.Fatalf("no sample of %s with %v", name, want)
	return 0, 0
}

// find returns the first sample of a family whose labels include want,
// nil if there is none.
func find(fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-3 }

// TestMetricsAfterRealOperations runs a policy over the simulated fleet,
// backs a disk image up, restores it, verifies and collects garbage, then
// lets the health monitor read the catalog and the repository, and scrapes
// the metrics: each value is what the catalog and the repository say.
func TestMetricsAfterRealOperations(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	servicetest.RegisterFake()
	f, err := config.Parse([]byte(metricsFleet))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := policy.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	pw := func() ([]byte, error) { return []byte("pw"), nil }
	s := operations.New(service.Config{Repository: service.Location{Location: filepath.Join(dir, "repo"), Password: pw},
		Catalog: filepath.Join(dir, "catalog.db"), StateDir: filepath.Join(dir, "state"), Engine: cfg, Metrics: m, Local: true})
	defer s.Close()
	if _, err := (repoops.Ops{Service: s}).InitWith(ctx, &api.InitRepositoryInput{}, repoops.InitOptions{Password: []byte("pw")}); err != nil {
		t.Fatal(err)
	}
	run, err := s.RunPolicy(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	job, err := run.Wait()
	if err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "a.img")
	data := make([]byte, 2<<20)
	_, _ = rand.Read(data)
	if err := os.WriteFile(img, data, 0o600); err != nil {
		t.Fatal(err)
	}
	disk, err := backupops.Ops{Service: s}.BackupDisk(ctx, &api.BackupDiskInput{Body: api.BackupDiskRequest{Paths: []string{img}, Name: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	restored, err := restoreops.Ops{Service: s}.RestoreDisks(ctx, &api.RestoreDiskInput{PointParam: api.PointParam{Point: disk.ID}, Body: api.RestoreRequest{To: filepath.Join(dir, "out.raw")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (repoops.Ops{Service: s}).Verify(ctx, &api.VerifyInput{Body: api.VerifyRequest{ReadData: true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := (repoops.Ops{Service: s}).GC(ctx, &api.GCInput{}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	clock := func() time.Time { return now }
	mon, err := fleetops.Ops{Service: s}.HealthMonitor(ctx, nil, clock)
	if err != nil {
		t.Fatal(err)
	}
	if err := mon.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if err := mon.RefreshStats(ctx); err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, m)

	// The newest point of each VM of the policy, as the catalog has it.
	points, _, err := repoops.Ops{Service: s}.CatalogPoints(auth.WithSubject(ctx, auth.Local()), &api.ListCatalogPointsInput{})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, p := range points {
		if p.Tags["policy"] != "web" {
			continue
		}
		seen++
		got, _ := value(t, fams, "coffer_backup_last_success_timestamp_seconds", map[string]string{"vm": p.VM, "policy": "web", "connection": "lab"})
		if want := float64(p.Time.UnixNano()) / 1e9; !near(got, want) {
			t.Errorf("last success of %s: %f, want %f", p.VM, got, want)
		}
	}
	if seen != job.TasksOK || seen != 3 {
		t.Fatalf("%d points of the policy, %d VMs backed up", seen, job.TasksOK)
	}
	if n, _ := value(t, fams, "coffer_backup_duration_seconds", map[string]string{"policy": "web"}); int(n) != job.TasksOK {
		t.Errorf("backup durations observed: %v, want %d", n, job.TasksOK)
	}
	if n, sum := value(t, fams, "coffer_restore_bytes", map[string]string{"kind": "restore"}); n != 1 || int64(sum) != restored[0].SizeBytes {
		t.Errorf("restore bytes: %v observations summing to %v, want 1 of %d", n, sum, restored[0].SizeBytes)
	}
	st, err := repoops.Ops{Service: s}.Stats(ctx, &api.RepoParam{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := value(t, fams, "coffer_repository_stored_bytes", map[string]string{"repository": "default"}); int64(got) != st.StoredBytes {
		t.Errorf("stored bytes %v, want %d", got, st.StoredBytes)
	}
	if got, _ := value(t, fams, "coffer_repository_dedup_ratio", map[string]string{"repository": "default"}); !near(got, st.DedupRatio) {
		t.Errorf("dedup ratio %v, want %v", got, st.DedupRatio)
	}
	if got, _ := value(t, fams, "coffer_repository_capacity_bytes", map[string]string{"repository": "default"}); int64(got) <= st.StoredBytes {
		t.Errorf("capacity %v is not more than what the repository holds (%d)", got, st.StoredBytes)
	}
	for kind, metric := range map[string]string{"verify": "coffer_verify_last_success_timestamp_seconds", "gc": "coffer_gc_last_success_timestamp_seconds"} {
		jobs, err := servicetest.ListJobs(ctx, s, &api.ListJobsInput{Kind: kind, Limit: 1})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("%s jobs: %v %v", kind, jobs, err)
		}
		got, _ := value(t, fams, metric, map[string]string{"repository": "default"})
		if want := float64(jobs[0].Finished.UnixNano()) / 1e9; !near(got, want) {
			t.Errorf("%s: %f, want %f (job %d)", metric, got, want, jobs[0].ID)
		}
		if n, _ := value(t, fams, "coffer_tasks_finished_total", map[string]string{"kind": kind, "status": "success"}); n != 1 {
			t.Errorf("finished %s tasks: %v", kind, n)
		}
	}
	if n, _ := value(t, fams, "coffer_tasks_running", map[string]string{"kind": "verify"}); n != 0 {
		t.Errorf("running verify tasks: %v", n)
	}
	if n, _ := value(t, fams, "coffer_vms_outside_rpo", map[string]string{"policy": "web"}); n != 0 {
		t.Errorf("VMs outside their RPO right after their backup: %v", n)
	}
	if rpo, _ := value(t, fams, "coffer_policy_rpo_seconds", map[string]string{"policy": "web"}); rpo != 26*3600 {
		t.Errorf("rpo: %v", rpo)
	}
	// Two days later, with no backup since, every VM misses its RPO.
	now = now.Add(48 * time.Hour)
	if err := mon.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := value(t, scrape(t, m), "coffer_vms_outside_rpo", map[string]string{"policy": "web"}); int(n) != job.TasksOK {
		t.Errorf("VMs outside their RPO two days later: %v, want %d", n, job.TasksOK)
	}
}
