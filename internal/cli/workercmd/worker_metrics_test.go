package workercmd_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// congestedConfig is one VM whose guest I/O reports 50 ms, ten times its
// datastore's latency-control threshold, held part-way until the file
// %s exists: the worker throttles its read for as long as the test looks
// (at 1 MiB/s at least, so that the rest, under 2 MiB, is read soon once
// released).
const congestedConfig = `
maintenance: {worker-dead-after: 2s}
latency-control:
  - {datastores: [ds-001], threshold: 5ms, min-rate: 1MiB/s, interval: 100ms}
connections:
  - {name: busy, kind: fake, options: {seed: 3, vms: 1, hosts: 1, datastores: 1, disk-size: 2MiB, allocated: 1, disk-latency: 50ms, hold-from-block: 8, hold-until: %q}}
policies:
  - {name: busy, connections: [busy], schedule: "0 3 1 1 *"}
`

// TestWorkerMetricsShowItsThrottling: a worker started with
// --metrics-listen serves, while it throttles a unit on a congested
// datastore, the unit's read rate limit and the datastore's congestion as
// coffer_worker_* series labelled by the worker; once the unit ends, the
// rate series is gone.
func TestWorkerMetricsShowItsThrottling(t *testing.T) {
	e := pgEnv(t, testutil.StartPostgres(t))
	release := filepath.Join(t.TempDir(), "release")
	e.Config(fmt.Sprintf(congestedConfig, release))
	srv := e.StartServer()
	token := e.AdminToken()
	served := func(s *clitest.ServerProc) bool { return strings.Contains(s.Stderr.String(), "worker metrics served") }
	w := e.StartCoffer(served, patience, append([]string{"worker", "--name", "kvm1", "--slots", "1", "--reach-connections", "busy",
		"--heartbeat", beat.String(), "--dead-after", dead.String(), "--log-level", "info", "--metrics-listen", "127.0.0.1:0"},
		e.WorkerLogin("kvm1")...)...)
	url := regexp.MustCompile(`url=(http://\S+/metrics)`).FindStringSubmatch(w.Log())
	if url == nil {
		t.Fatalf("the worker logged no metrics address:\n%s", w.Log())
	}
	waitLog(t, srv, "the engine given the worker", "the engine places units on the workers", "workers=kvm1")
	defer func() {
		if t.Failed() {
			t.Logf("server:\n%s\nkvm1:\n%s", srv.Log(), w.Log())
		}
	}()
	scrape := func() string {
		t.Helper()
		res, err := http.Get(url[1])
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = res.Body.Close() }()
		body, _ := io.ReadAll(res.Body)
		return string(body)
	}
	// Idle, the worker runs on one Go processor (package procs).
	oneP := "go_sched_gomaxprocs_threads 1\n"
	deadline := time.Now().Add(patience)
	for got := scrape(); !strings.Contains(got, oneP); got = scrape() {
		if time.Now().After(deadline) {
			t.Fatalf("the idle worker's metrics showed no %q within %s:\n%s", oneP, patience, got)
		}
		time.Sleep(100 * time.Millisecond) // a poll's pace, not a synchronisation
	}
	rate := regexp.MustCompile(`coffer_worker_read_rate_limit_bytes_per_second\{connection="busy",datastore="ds-001",policy="busy",vm="[^"]+",worker="kvm1"\} ([0-9.e+]+)`)
	congested := `coffer_worker_datastore_congested{connection="busy",datastore="ds-001",worker="kvm1"} 1`

	done := make(chan api.Job, 1)
	go func() { done <- srv.RunPolicy(token, "busy") }()
	defer func() { _ = os.WriteFile(release, nil, 0o600) }() // a failed test lets the unit end
	var got string
	deadline = time.Now().Add(patience)
	for !(rate.MatchString(got) && strings.Contains(got, congested)) {
		if time.Now().After(deadline) {
			t.Fatalf("the worker's metrics showed no throttled read within %s:\n%s", patience, got)
		}
		time.Sleep(100 * time.Millisecond) // a poll's pace, not a synchronisation
		got = scrape()
	}
	t.Logf("while throttled: %s", rate.FindString(got))
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case j := <-done:
		if j.Status != "success" {
			t.Fatalf("the throttled run: %+v", j)
		}
	case <-time.After(patience):
		t.Fatalf("the released run did not end within %s", patience)
	}
	// The unit left the watch when it ended, before its outcome reached
	// the leader: no rate is shown any more.
	if got := scrape(); strings.Contains(got, "coffer_worker_read_rate_limit_bytes_per_second{") {
		t.Fatalf("a rate series once the unit ended:\n%s", got)
	}
}
