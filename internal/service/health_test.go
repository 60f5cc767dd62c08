package service_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/maintenance"
	"github.com/coffer-backup/coffer/internal/notify"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/backupops"
	"github.com/coffer-backup/coffer/internal/service/fleetops"
	"github.com/coffer-backup/coffer/internal/service/operations"
	"github.com/coffer-backup/coffer/internal/service/repoops"
	"github.com/coffer-backup/coffer/internal/service/servicetest"
	storeall "github.com/coffer-backup/coffer/internal/store/all"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// recordedEvents lists the notification events recorded in the catalog,
// by type.
func recordedEvents(t *testing.T, cat catalog.Catalog) map[string][]catalog.NotificationEvent {
	t.Helper()
	ds, err := cat.ListDeliveries(context.Background(), catalog.DeliveryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]catalog.NotificationEvent{}
	for _, d := range ds {
		out[d.Event.Type] = append(out[d.Event.Type], d.Event)
	}
	return out
}

// TestHealthNotifies: the health monitor tells once of each VM that
// misses its policy's RPO (not again at the next check, again after it
// recovered and missed anew), and of a repository past its threshold.
func TestHealthNotifies(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	servicetest.RegisterFake()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	defer hook.Close()
	f, err := config.Parse([]byte(metricsFleet + `
maintenance:
  capacity: {default: 1KiB}
  repository-full: 80
notifications:
  targets:
    - name: chat
      webhook: {url: "` + hook.URL + `"}
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := policy.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	ncfg, err := notify.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	mcfg, err := maintenance.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	pw := func() ([]byte, error) { return []byte("pw"), nil }
	loc := filepath.Join(dir, "catalog.db")
	s := operations.New(service.Config{Repository: service.Location{Location: filepath.Join(dir, "repo"), Password: pw},
		Catalog: loc, StateDir: filepath.Join(dir, "state"), Engine: cfg, Notify: ncfg, Maintenance: mcfg})
	defer s.Close()
	if _, err := (repoops.Ops{Service: s}).InitWith(ctx, &api.InitRepositoryInput{}, repoops.InitOptions{Password: []byte("pw")}); err != nil {
		t.Fatal(err)
	}
	run, err := s.RunPolicy(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Wait(); err != nil {
		t.Fatal(err)
	}
	cat, err := catalogopen.Open(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()

	now := time.Now()
	mon, err := fleetops.Ops{Service: s}.HealthMonitor(ctx, nil, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	if err := mon.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(recordedEvents(t, cat)["rpo-missed"]); n != 0 {
		t.Fatalf("%d rpo-missed right after the backups", n)
	}
	now = now.Add(48 * time.Hour)
	for range 2 { // the second check tells nothing new
		if err := mon.Check(ctx); err != nil {
			t.Fatal(err)
		}
	}
	missed := recordedEvents(t, cat)["rpo-missed"]
	vms := map[string]bool{}
	for _, ev := range missed {
		vms[ev.Object] = true
	}
	if len(missed) != 3 || len(vms) != 3 {
		t.Fatalf("rpo-missed events %+v, want one per VM of the policy", missed)
	}
	// A new run brings the VMs back within their RPO; missing it again
	// is news again.
	now = time.Now()
	if run, err = s.RunPolicy(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := mon.Check(ctx); err != nil {
		t.Fatal(err)
	}
	now = now.Add(48 * time.Hour)
	if err := mon.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(recordedEvents(t, cat)["rpo-missed"]); n != 6 {
		t.Fatalf("%d rpo-missed events after a second miss, want 6", n)
	}
	// The repository holds more than 80% of its 1 KiB capacity.
	for range 2 {
		if err := mon.RefreshStats(ctx); err != nil {
			t.Fatal(err)
		}
	}
	full := recordedEvents(t, cat)["repository-full"]
	if len(full) != 1 || full[0].Object != "/repositories/default" || full[0].Severity != "error" {
		t.Fatalf("repository-full events: %+v", full)
	}
}

// TestLockLapsingNotifies backs a disk up into an Object Lock bucket
// (versitygw) locked for two days, and lets the health monitor look with
// a warning horizon of three days: it tells once that the point's lock
// ends soon, with the point and its lock's end; with a horizon of one day
// it would not.
func TestLockLapsingNotifies(t *testing.T) {
	srv := testutil.StartS3(t)
	ctx := context.Background()
	dir := t.TempDir()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	defer hook.Close()
	f, err := config.Parse([]byte(`
maintenance:
  lock-warning: 3d
notifications:
  targets:
    - name: chat
      webhook: {url: "` + hook.URL + `"}
`))
	if err != nil {
		t.Fatal(err)
	}
	ncfg, err := notify.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	mcfg, err := maintenance.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	pw := func() ([]byte, error) { return []byte("pw"), nil }
	loc := filepath.Join(dir, "catalog.db")
	s := operations.New(service.Config{Repository: service.Location{Location: "s3://" + srv.Bucket(t, true) + "/r", Password: pw},
		Stores: storeall.Config{S3: storeall.S3Config{Endpoint: srv.Endpoint, Region: "us-east-1", PathStyle: true,
			AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey}},
		Catalog: loc, StateDir: filepath.Join(dir, "state"), Engine: &policy.Config{}, Notify: ncfg, Maintenance: mcfg, Local: true})
	defer s.Close()
	if _, err := (repoops.Ops{Service: s}).InitWith(ctx, &api.InitRepositoryInput{}, repoops.InitOptions{Password: []byte("pw")}); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "a.img")
	if err := os.WriteFile(img, []byte("a small disk that must stay"), 0o600); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(48 * time.Hour).Truncate(time.Second)
	pt, err := backupops.Ops{Service: s}.BackupDisk(ctx, &api.BackupDiskInput{Body: api.BackupDiskRequest{Paths: []string{img}, Name: "a", LockedUntil: until}})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalogopen.Open(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	mon, err := fleetops.Ops{Service: s}.HealthMonitor(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // told once
		if err := mon.RefreshStats(ctx); err != nil {
			t.Fatal(err)
		}
	}
	lapsing := recordedEvents(t, cat)["lock-lapsing"]
	if len(lapsing) != 1 {
		t.Fatalf("lock-lapsing events: %+v", lapsing)
	}
	var ev notify.Event
	if err := json.Unmarshal(lapsing[0].Data, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Lock == nil || !strings.HasPrefix(pt.ID, ev.Lock.Point) || !ev.Lock.LockUntil.Equal(until.UTC()) || ev.Lock.WithinDays != 3 {
		t.Fatalf("lock details %+v, want point %s until %s within 3 days", ev.Lock, pt.ID, until)
	}
}
