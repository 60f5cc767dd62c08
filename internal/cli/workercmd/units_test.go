package workercmd_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// unitsConfig is a simulated fleet of two connections, one per worker:
// kind fake is not host-bound (only qemu and libvirt are, engine.RouteOf),
// so each worker's reach is one connection, which routes as hard as a
// host would. A snapshot takes 500 ms, long enough to kill a worker while
// it backs up. The schedule (once a year) only makes the server open the
// connections, so that a run through its API goes through its engine.
const unitsConfig = `
maintenance: {worker-dead-after: 2s}
connections:
  - {name: east, kind: fake, options: {seed: 1, vms: 3, hosts: 1, datastores: 1, disk-size: 256KiB, snapshot-create: 500ms}}
  - {name: west, kind: fake, options: {seed: 2, vms: 3, hosts: 1, datastores: 1, disk-size: 256KiB, snapshot-create: 500ms}}
policies:
  - {name: fleet, connections: [east, west], schedule: "0 3 1 1 *", retries: {attempts: 3, backoff: 100ms, max-backoff: 100ms}}
`

// home is the worker that reaches each connection.
var home = map[string]string{"east": "kvm1", "west": "kvm2"}

// startUnitWorker starts `coffer worker` reaching one connection, with a
// token of its own.
func startUnitWorker(e *clitest.Env, name, connection string) *clitest.ServerProc {
	e.T.Helper()
	registered := func(s *clitest.ServerProc) bool { return strings.Contains(s.Stderr.String(), "worker registered") }
	return e.StartCoffer(registered, patience, append([]string{"worker", "--name", name, "--slots", "2", "--reach-connections", connection,
		"--heartbeat", beat.String(), "--dead-after", dead.String(), "--log-level", "info"}, e.WorkerLogin(name)...)...)
}

// waitLog waits until the process has logged every one of wants.
func waitLog(t *testing.T, p *clitest.ServerProc, what string, wants ...string) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		log, all := p.Log(), true
		for _, w := range wants {
			all = all && strings.Contains(log, w)
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s:\n%s", what, patience, log)
		}
		time.Sleep(50 * time.Millisecond) // a poll's pace, not a synchronisation
	}
}

// TestPolicyRunsOnTheWorkers: a policy run through the server hands each
// VM's attempt to the worker that reaches it, which backs the VM up into
// the repository; the server records the points. A worker killed with
// SIGKILL mid-run is declared lost, its units are re-admitted and run on
// its restarted process (no other worker reaches them), and the job still
// succeeds with one new point per VM; no worker ran more units than its
// slots during the recovery, nor a VM twice at once.
func TestPolicyRunsOnTheWorkers(t *testing.T) {
	e := pgEnv(t, testutil.StartPostgres(t))
	e.Config(unitsConfig)
	srv := e.StartServer()
	token := e.AdminToken()
	cat := openCatalog(t, e)
	w1 := startUnitWorker(e, "kvm1", "east")
	w2 := startUnitWorker(e, "kvm2", "west")
	waitLog(t, srv, "the engine given both workers", "the engine places units on the workers", "workers=kvm1,kvm2")

	job := runFleet(t, srv, token)
	checkUnits(t, cat, job, 1)
	if t.Failed() {
		t.Fatalf("server:\n%s\nkvm1:\n%s", srv.Log(), w1.Log())
	}

	// Kill kvm1 once it backs up a VM; restart it once declared lost.
	since := time.Now()
	done := make(chan api.Job, 1)
	go func() { done <- srv.RunPolicy(token, "fleet") }()
	ev := waitEvent(t, cat, since, "kvm1")
	if err := w1.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = awaitExit(t, w1)
	waitWorker(t, cat, "kvm1", "kvm1 lost", func(w catalog.Worker) bool { return w.State == catalog.WorkerLost })
	waitLog(t, srv, "kvm1's units re-admitted", "a lost worker's running units are re-admitted")
	t.Logf("kvm1's units re-admitted %s after the kill", time.Since(killed).Round(time.Millisecond))
	w1again := startUnitWorker(e, "kvm1", "east")
	var second api.Job
	select {
	case second = <-done:
	case <-time.After(2 * patience):
		t.Fatalf("the run did not end after kvm1's restart\n%s", srv.Log())
	}
	if second.Status != "success" || second.ID != ev.JobID {
		t.Fatalf("the run with a killed worker: %+v (the killed attempt was of job %d)\n%s", second, ev.JobID, srv.Log())
	}
	checkUnits(t, cat, second, 2)
	// No over-grant during the recovery: by the workers' logs, no worker
	// ever ran more units than its slots, nor a VM twice at once (the
	// killed process's units end at the kill).
	spans := unitSpans(t, "kvm1", w1.Log(), killed)
	spans = append(spans, unitSpans(t, "kvm1", w1again.Log(), time.Now())...)
	spans = append(spans, unitSpans(t, "kvm2", w2.Log(), time.Now())...)
	if len(spans) < 13 {
		t.Fatalf("the workers logged %d units, want the two runs' 12 and the killed attempt", len(spans))
	}
	checkGrantPeaks(t, "the workers' logs across the kill", spans)
	// The attempt running at the kill was abandoned and retried.
	killedTask, err := cat.ListTasks(context.Background(), catalog.TaskFilter{JobID: ev.JobID})
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range killedTask {
		if task.ID == ev.TaskID && task.Attempts < 2 {
			t.Errorf("%s, whose attempt ran on kvm1 when it was killed, took %d attempt", task.VMName, task.Attempts)
		}
	}
	t.Logf("the run with a killed worker took %.1fs", second.DurationSeconds)
}

// runFleet runs the policy through the server and wants it to succeed.
func runFleet(t *testing.T, srv *clitest.ServerProc, token string) api.Job {
	t.Helper()
	j := srv.RunPolicy(token, "fleet")
	if j.Status != "success" || j.TasksOK != 6 {
		t.Fatalf("run fleet: %+v\n%s", j, srv.Log())
	}
	return j
}

// checkUnits wants every task of the job to have run on its connection's
// worker (the worker's events in the task's log), with a point of its own,
// and the catalog to hold runs points for every VM.
func checkUnits(t *testing.T, cat catalog.Catalog, j api.Job, runs int) {
	t.Helper()
	ctx := context.Background()
	tasks, err := cat.ListTasks(ctx, catalog.TaskFilter{JobID: j.ID})
	if err != nil || len(tasks) != 6 {
		t.Fatalf("job %d's tasks: %d, %v", j.ID, len(tasks), err)
	}
	for _, task := range tasks {
		ran := ranOn(t, cat, task)
		if task.Status != catalog.StatusSuccess || task.BackupPointID == "" || ran != home[task.Connection] {
			t.Errorf("%s/%s: %s, point %q, last attempt (%d) ran on %q, want %s", task.Connection, task.VMName, task.Status,
				task.BackupPointID, task.Attempts, ran, home[task.Connection])
		}
		pts, err := cat.ListBackupPoints(ctx, catalog.BackupPointFilter{VMID: task.VMID})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range pts {
			if p.Connection == task.Connection {
				n++
			}
		}
		if n != runs {
			t.Errorf("%s/%s has %d points after %d runs", task.Connection, task.VMName, n, runs)
		}
	}
}

// waitEvent waits for a unit of a run started after since to run on
// worker.
func waitEvent(t *testing.T, cat catalog.Catalog, since time.Time, worker string) catalog.Event {
	t.Helper()
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		evs, err := cat.ListEvents(context.Background(), catalog.EventFilter{Since: since})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Kind == "worker" && ev.Fields["worker"] == worker && strings.Contains(ev.Message, "runs on") {
				return ev
			}
		}
		time.Sleep(20 * time.Millisecond) // a poll's pace, not a synchronisation
	}
	t.Fatalf("no unit ran on %s within %s", worker, patience)
	return catalog.Event{}
}
