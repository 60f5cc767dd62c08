package workercmd_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// paceConfig is one worker's connections, each of one VM, for what the
// engine gives a unit beside its backup:
//   - slow: a snapshot takes 6 s, over its policy's 1 s snapshot-create
//     timeout (the fake ignores the request's timeouts, as a hung
//     hypervisor does: only the unit's guard bounds it);
//   - long: 256 blocks of 64 KiB read 150 ms each (several seconds, the
//     pipeline reads a few at once), long enough to watch its progress;
//   - busy: its guest's I/O at 50 ms (the fake's sessions report it), ten
//     times the latency-control threshold of its datastore.
//
// Every fake VM is on datastore ds-001: the section watches all three,
// but only busy's sessions report a latency.
const paceConfig = `
maintenance: {worker-dead-after: 2s}
latency-control:
  - {datastores: [ds-001], threshold: 5ms, min-rate: 64KiB/s, interval: 100ms}
connections:
  - {name: slow, kind: fake, options: {seed: 1, vms: 1, hosts: 1, datastores: 1, disk-size: 256KiB, snapshot-create: 6s}}
  - {name: long, kind: fake, options: {seed: 2, vms: 1, hosts: 1, datastores: 1, disk-size: 16MiB, allocated: 1, read-delay: 150ms}}
  - {name: busy, kind: fake, options: {seed: 3, vms: 1, hosts: 1, datastores: 1, disk-size: 8MiB, allocated: 1, read-delay: 20ms, disk-latency: 50ms}}
policies:
  - {name: timeout, connections: [slow], schedule: "0 3 1 1 *", timeouts: {snapshot-create: 1s}, retries: {attempts: 2, backoff: 100ms, max-backoff: 100ms}}
  - {name: progress, connections: [long], schedule: "0 3 1 1 *"}
  - {name: throttle, connections: [busy], schedule: "0 3 1 1 *"}
`

// TestUnitsOnAWorkerAsInTheEngine: a VM unit run on a worker gets what
// the in-process engine gives its tasks: the policy's per-operation
// timeouts, live progress in the server's job view, and latency-driven
// throttling.
func TestUnitsOnAWorkerAsInTheEngine(t *testing.T) {
	e := pgEnv(t, testutil.StartPostgres(t))
	e.Config(paceConfig)
	srv := e.StartServer()
	token := e.AdminToken()
	registered := func(s *clitest.ServerProc) bool { return strings.Contains(s.Stderr.String(), "worker registered") }
	w := e.StartCoffer(registered, patience, append([]string{"worker", "--name", "kvm1", "--slots", "2", "--reach-connections", "slow,long,busy",
		"--heartbeat", beat.String(), "--dead-after", dead.String(), "--log-level", "info"}, e.WorkerLogin("kvm1")...)...)
	waitLog(t, srv, "the engine given the worker", "the engine places units on the workers", "workers=kvm1")

	t.Run("snapshot timeout", func(t *testing.T) { snapshotTimeoutOnAWorker(t, srv, token) })
	t.Run("progress", func(t *testing.T) { progressOfAUnitOnAWorker(t, srv, token) })
	t.Run("throttle", func(t *testing.T) { throttleOnAWorker(t, srv, w, token) })
	if t.Failed() {
		t.Logf("server:\n%s\nkvm1:\n%s", srv.Log(), w.Log())
	}
}

// snapshotTimeoutOnAWorker: the 6 s snapshot exceeds the policy's 1 s
// snapshot-create timeout on the worker; the attempt fails with the
// timeout error, is retried per the policy (2 attempts), and the task
// fails with it.
func snapshotTimeoutOnAWorker(t *testing.T, srv *clitest.ServerProc, token string) {
	start := time.Now()
	j := srv.RunPolicy(token, "timeout")
	t.Logf("the run with a 6 s snapshot and a 1 s timeout took %s", time.Since(start).Round(time.Millisecond))
	full := jobView(t, srv, token, j.ID)
	if j.Status != "failed" || len(full.Tasks) != 1 {
		t.Fatalf("the run: %+v", full)
	}
	task := full.Tasks[0]
	if task.Attempts != 2 || !strings.Contains(task.Error, "snapshot create: hypervisor operation timed out after 1s") {
		t.Fatalf("the task: %d attempts, error %q; want 2 attempts failed by the snapshot-create timeout", task.Attempts, task.Error)
	}
	retried, timedOut := 0, 0
	for _, ev := range full.Events {
		switch {
		case ev.Kind == "retry" && strings.Contains(ev.Message, "timed out"):
			retried++
		case ev.Kind == "snapshot-create" && ev.Level == "warn" && ev.Fields["worker"] == "kvm1":
			timedOut++
		}
	}
	if retried != 1 || timedOut != 2 {
		t.Fatalf("the job's log: %d retries after a timeout (want 1), %d timed-out snapshot creates on kvm1 (want 2): %+v",
			retried, timedOut, full.Events)
	}
}

// progressOfAUnitOnAWorker polls the server's job view while the unit
// runs on the worker: its task's bytes read are shown, and grow, while it
// is running, before the run ends (the pipeline reads a few MiB at once,
// so the 16 MiB disk shows a handful of distinct samples).
func progressOfAUnitOnAWorker(t *testing.T, srv *clitest.ServerProc, token string) {
	done := make(chan api.Job, 1)
	go func() { done <- srv.RunPolicy(token, "progress") }()
	id := runningJob(t, srv, token, "progress")
	var seen []int64 // the task's bytes read, each time it changed while running
	deadline := time.Now().Add(patience)
	for len(seen) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the task's bytes read while running: %v; want them to grow within %s", seen, patience)
		}
		j := jobView(t, srv, token, id)
		if j.Status != "running" {
			t.Fatalf("the job ended (%s) with the task's bytes read seen growing only %v", j.Status, seen)
		}
		if len(j.Tasks) == 1 && j.Tasks[0].Status == "running" && j.Tasks[0].ReadBytes > 0 &&
			(len(seen) == 0 || j.Tasks[0].ReadBytes > seen[len(seen)-1]) {
			seen = append(seen, j.Tasks[0].ReadBytes)
		}
		time.Sleep(100 * time.Millisecond) // a poll's pace, not a synchronisation
	}
	t.Logf("the running task's bytes read, as the server showed them: %v", seen)
	var j api.Job
	select {
	case j = <-done:
	case <-time.After(patience):
		t.Fatalf("the run did not end within %s", patience)
	}
	full := jobView(t, srv, token, id)
	if j.Status != "success" || len(full.Tasks) != 1 || full.Tasks[0].ReadBytes < seen[len(seen)-1] || full.Tasks[0].PointID == "" {
		t.Fatalf("the run: %+v", full)
	}
	// The worker notes its hypervisor calls' durations as the engine does
	// (the planner reads them).
	noted := map[string]bool{}
	for _, ev := range full.Events {
		if ev.Fields["worker"] == "kvm1" && ev.Level == "info" {
			noted[ev.Kind] = true
		}
	}
	if !noted["snapshot-create"] || !noted["snapshot-remove"] {
		t.Fatalf("the job's log has no snapshot create and remove noted by kvm1: %+v", full.Events)
	}
}

// throttleOnAWorker: the busy VM's disks report 50 ms, over its
// datastore's 5 ms threshold; the worker throttles the unit's reads (its
// log and the job's say so) and the backup still succeeds.
func throttleOnAWorker(t *testing.T, srv *clitest.ServerProc, w *clitest.ServerProc, token string) {
	j := srv.RunPolicy(token, "throttle")
	if j.Status != "success" {
		t.Fatalf("the run: %+v", j)
	}
	waitLog(t, w, "the worker's log says the reads slowed", "reads slowed to", "datastore ds-001 is congested")
	full := jobView(t, srv, token, j.ID)
	slowed := false
	for _, ev := range full.Events {
		if ev.Kind == "latency-throttle" && strings.HasPrefix(ev.Message, "reads slowed to") {
			rate, _ := ev.Fields["rate_bytes_per_second"].(float64)
			slowed = rate > 0
			t.Logf("throttled on the worker: %s", ev.Message)
		}
	}
	if !slowed {
		t.Fatalf("no throttle with a rate in the job's log: %+v", full.Events)
	}
}

// jobView is the server's view of a job: GET /jobs/{id}, with its tasks
// and log.
func jobView(t *testing.T, srv *clitest.ServerProc, token string, id int64) api.Job {
	t.Helper()
	var j api.Job
	if code, _ := srv.Call(token, "GET", fmt.Sprintf("/jobs/%d?log=1000", id), nil, &j); code != http.StatusOK {
		t.Fatalf("GET /jobs/%d: %d", id, code)
	}
	return j
}

// runningJob waits for a run of policy to be running, and returns its ID.
func runningJob(t *testing.T, srv *clitest.ServerProc, token, policy string) int64 {
	t.Helper()
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		var page []api.Job
		if code, _ := srv.Call(token, "GET", "/jobs?policy="+policy+"&status=running", nil, &page); code != http.StatusOK {
			t.Fatalf("GET /jobs: %d", code)
		}
		if len(page) > 0 {
			return page[0].ID
		}
		time.Sleep(50 * time.Millisecond) // a poll's pace, not a synchronisation
	}
	t.Fatalf("no run of %s running within %s", policy, patience)
	return 0
}
