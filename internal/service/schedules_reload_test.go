package service_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/metrics"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/fleetops"
	"github.com/coffer-backup/coffer/internal/service/repoops"
	"github.com/coffer-backup/coffer/internal/service/servicetest"
)

// TestServerReloadKeepsClaimsMonitorAndNotifier: what the server runs
// beside the policies follows the configuration in effect too. A policy
// created through the API runs under the schedules' lease, each run
// claimed at its slot and started by @schedule, beside the gc of the
// maintenance section; the health monitor takes up the new policy's RPO
// and watches a repository created through the API (and forgets it once
// deleted); a notification target and matcher created through the API
// are told of the runs; and deleting a repository the maintenance section
// names is refused.
func TestServerReloadKeepsClaimsMonitorAndNotifier(t *testing.T) {
	told := make(chan map[string]any, 64)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev map[string]any
		if json.NewDecoder(r.Body).Decode(&ev) == nil {
			select {
			case told <- ev:
			default: // the test has what it needs
			}
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	e := newConfEnv(t, "connections: ["+labSpec+"]\n"+`maintenance:
  health-every: 1s
  stats-every: 1s
  repositories:
    - {repository: default, gc: {schedule: "@every 1s"}}
    - {repository: extra, gc: {schedule: "0 3 1 1 *"}}
`)
	e.poll = 20 * time.Millisecond
	m := metrics.New()
	server := e.service(func(c *service.Config) { c.Metrics = m })
	other := e.service()
	ctx := e.ctx
	if _, err := (repoops.Ops{Service: server}).InitWith(context.Background(), &api.InitRepositoryInput{}, repoops.InitOptions{Password: []byte("pw")}); err != nil {
		t.Fatal(err)
	}
	pwFile := e.secretFile("repo.pw", "pw")
	// The maintenance section names extra: the server starts once it exists.
	if _, err := servicetest.CreateObject(ctx, other, "repository", spec(t, `{name: extra, location: "`+filepath.Join(e.dir, "extra")+`", password-file: "`+pwFile+`"}`)); err != nil {
		t.Fatal(err)
	}
	run := runServer(t, server)
	// Everything below is created once the server runs, and reaches it
	// only by reloading.
	eventually(t, run, "the server takes the schedules' lease", func() bool {
		v, ok := sample(scrape(t, m), "coffer_schedules_leader", nil)
		return ok && v == 1
	})
	for _, obj := range []struct {
		kind string
		spec map[string]any
	}{
		{"notification-target", spec(t, `{name: hook, webhook: {url: "`+hook.URL+`"}}`)},
		{"notification-matcher", spec(t, `{name: often-ends, targets: [hook], types: [task-succeeded], labels: {policy: often}}`)},
		{"policy", spec(t, `{name: often, connection: lab, schedule: "@every 1s", rpo: 1h}`)},
	} {
		if _, err := servicetest.CreateObject(ctx, other, obj.kind, obj.spec); err != nil {
			t.Fatal(err)
		}
	}

	// The policy's runs and the maintenance gc: started by @schedule, each
	// naming its slot, each slot claimed in the catalog.
	cat, err := catalogopen.Open(ctx, e.catalog)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	for _, c := range []struct{ schedule, kind, policy string }{
		{"policy/often", "backup-policy", "often"},
		{"maintenance/default/gc", "gc", ""},
	} {
		var job *api.Job
		eventually(t, run, "a finished "+c.kind+" run of the schedules", func() bool {
			jobs, err := servicetest.ListJobs(ctx, other, &api.ListJobsInput{Kind: c.kind, Policy: c.policy, Status: "success"})
			if err != nil {
				t.Fatal(err)
			}
			if len(jobs) == 0 {
				return false
			}
			if job, err = servicetest.WholeJob(ctx, other, jobs[0].ID); err != nil {
				t.Fatal(err)
			}
			return true
		})
		if job.User != service.ScheduleUser {
			t.Errorf("%s job %d started by %q, want %s", c.kind, job.ID, job.User, service.ScheduleUser)
		}
		slot := ""
		for _, ev := range job.Events {
			if s, ok := ev.Fields["slot"].(string); ok && strings.HasPrefix(ev.Message, "scheduled run of ") {
				slot = s
			}
		}
		at, err := time.Parse(time.RFC3339, slot)
		if err != nil {
			t.Fatalf("%s job %d names no slot in its log: %+v", c.kind, job.ID, job.Events)
		}
		if mine, err := cat.ClaimRun(ctx, c.schedule, at, "another-server", time.Now()); err != nil || mine {
			t.Fatalf("the run of %s at %s was not claimed before it started (another server could claim it: %v, %v)", c.schedule, slot, mine, err)
		}
	}

	// The notifier took the target and matcher created through the API.
	eventually(t, run, "the webhook told of a run of often", func() bool {
		select {
		case ev := <-told:
			labels, _ := ev["labels"].(map[string]any)
			return ev["type"] == "task-succeeded" && labels["policy"] == "often"
		default:
			return false
		}
	})

	// The health monitor took the new policy's RPO, and watches a
	// repository created through the API until it is deleted.
	eventually(t, run, "the RPO of often in the metrics", func() bool {
		v, ok := sample(scrape(t, m), "coffer_policy_rpo_seconds", map[string]string{"policy": "often"})
		return ok && v == 3600
	})
	more := e.service(func(c *service.Config) { c.Repository.Location = filepath.Join(e.dir, "more") })
	if _, err := (repoops.Ops{Service: more}).InitWith(context.Background(), &api.InitRepositoryInput{}, repoops.InitOptions{Password: []byte("pw")}); err != nil {
		t.Fatal(err)
	}
	if _, err := servicetest.CreateObject(ctx, other, "repository", spec(t, `{name: more, location: "`+filepath.Join(e.dir, "more")+`", password-file: "`+pwFile+`"}`)); err != nil {
		t.Fatal(err)
	}
	statsOfMore := func() bool {
		_, ok := sample(scrape(t, m), "coffer_repository_stats_timestamp_seconds", map[string]string{"repository": "more"})
		return ok
	}
	eventually(t, run, "the statistics of a repository created through the API", statsOfMore)
	if _, err := servicetest.DeleteObject(ctx, other, "repository", "more", 0); err != nil {
		t.Fatal(err)
	}
	eventually(t, run, "the statistics of a deleted repository leave the metrics", func() bool { return !statsOfMore() })

	// The maintenance section is checked with every change.
	_, err = servicetest.DeleteObject(ctx, other, "repository", "extra", 0)
	wantClass(t, "deleting a repository the maintenance section names", err, api.Invalid,
		`maintenance: repositories[1]: unknown repository "extra"`)
}

// serverRun is a server's RunSchedules in the background of a test.
type serverRun struct {
	stopped chan struct{} // closed when RunSchedules returned err
	err     error
}

// runServer runs s's schedules until the test ends, then stops them; a
// server that stopped with an error fails the test.
func runServer(t *testing.T, s *service.Service) *serverRun {
	ctx, stop := context.WithCancel(context.Background())
	r := &serverRun{stopped: make(chan struct{})}
	go func() {
		defer close(r.stopped)
		r.err = fleetops.Ops{Service: s}.RunSchedules(ctx)
	}()
	t.Cleanup(func() {
		stop()
		<-r.stopped
		if r.err != nil {
			t.Errorf("the server stopped with %v", r.err)
		}
	})
	return r
}

// eventually polls ok until it holds, failing the test if the server
// stops or waitGuard passes.
func eventually(t *testing.T, r *serverRun, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitGuard)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !ok() {
		select {
		case <-r.stopped:
			t.Fatalf("the server stopped: %v", r.err)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, waitGuard)
		}
	}
}

// sample is the value of a gauge whose labels include want, and whether
// there is one.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	if m := find(fams, name, want); m != nil && m.Gauge != nil {
		return m.Gauge.GetValue(), true
	}
	return 0, false
}
