package workercmd_test

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// batchConfig is a simulated array of two datastores (kind fake, which
// takes storage snapshots itself) protected by a group: datastore policy:
// each datastore's VMs are one batch. A snapshot takes 500 ms, long
// enough to kill a worker in the middle of its batch. The schedule (once
// a year) only makes the server open the connection. The dead interval
// is 10 s (batchDead), not the other tests' 2 s: a worker that cannot
// renew for half of it fences itself and exits, and one that did so in
// the first run would leave its datastore's batch waiting for its
// return, which no supervisor brings here. With 2 s and then 4 s, a
// worker fenced itself so at load averages of 30 to 45.
const batchConfig = `
maintenance: {worker-dead-after: 10s}
connections:
  - {name: array, kind: fake, options: {seed: 7, vms: 8, hosts: 2, datastores: 2, disk-size: 256KiB, snapshot-create: 500ms}}
policies:
  - {name: ds, connection: array, group: datastore, schedule: "0 3 1 1 *", retries: {attempts: 3, backoff: 100ms, max-backoff: 100ms}}
`

const (
	batchVMs  = 8
	batchDead = 10 * time.Second
)

// startDatastoreWorker starts `coffer worker` reaching connection array
// and mounting its datastores dss.
func startDatastoreWorker(e *clitest.Env, name string, dss ...string) *clitest.ServerProc {
	e.T.Helper()
	registered := func(s *clitest.ServerProc) bool { return strings.Contains(s.Stderr.String(), "worker registered") }
	var reach []string
	for _, ds := range dss {
		reach = append(reach, "array/"+ds)
	}
	return e.StartCoffer(registered, patience, append([]string{"worker", "--name", name, "--slots", "2", "--reach-connections", "array",
		"--reach-datastores", strings.Join(reach, ","), "--heartbeat", beat.String(), "--dead-after", batchDead.String(), "--log-level", "info"},
		e.WorkerLogin(name)...)...)
}

// TestGroupBatchesRunWhereTheDatastoreIs: a group: datastore policy on a
// connection its workers reach runs each datastore's batch on the worker
// that mounts the datastore: the VMs' snapshots, the storage snapshot and
// every VM's read in that worker's process, each VM its own task with one
// point, recorded by the server. A worker killed in the middle of its
// batch is declared lost, and its VMs run again as a batch on another
// worker that mounts the datastore (kvm3, which mounts both); the job
// succeeds, every VM has exactly one point more, and the workers that
// ran batches left no VM or storage snapshot behind.
func TestGroupBatchesRunWhereTheDatastoreIs(t *testing.T) {
	e := pgEnv(t, testutil.StartPostgres(t))
	e.Config(batchConfig)
	srv := e.StartServer()
	token := e.AdminToken()
	cat := openCatalog(t, e)
	workers := map[string]*clitest.ServerProc{
		"kvm1": startDatastoreWorker(e, "kvm1", "ds-001"),
		"kvm2": startDatastoreWorker(e, "kvm2", "ds-002"),
	}
	waitLog(t, srv, "the engine given both workers", "the engine places units on the workers", "workers=kvm1,kvm2")
	mounts := map[string][]string{"ds-001": {"kvm1"}, "ds-002": {"kvm2"}}

	started := time.Now()
	first := runBatchPolicy(t, srv, token, workers)
	if first.Status != "success" || first.TasksOK != batchVMs {
		t.Fatalf("run ds: %+v\n%s", first, srv.Log())
	}
	t.Logf("the run of %d VMs in 2 batches took %s", batchVMs, time.Since(started).Round(time.Millisecond))
	checkBatchTasks(t, cat, first, mounts, 1, 1)
	for name, w := range workers {
		if log := w.Log(); !strings.Contains(log, `"batch starts"`) || strings.Contains(log, `"VM unit starts"`) {
			t.Errorf("%s ran no batch, or a VM by VM unit:\n%s", name, log)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Kill kvm1 once its batch runs; kvm3, which mounts ds-001 too, takes
	// the batch over (kvm3 mounts ds-002 too: kvm2's batch may run there
	// if kvm2 fenced itself under load, as one did under a busy core).
	since := time.Now()
	done := make(chan api.Job, 1)
	go func() { done <- srv.RunPolicy(token, "ds") }()
	ev := waitEvent(t, cat, since, "kvm1")
	if err := workers["kvm1"].Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = awaitExit(t, workers["kvm1"])
	waitWorker(t, cat, "kvm1", "kvm1 lost", func(w catalog.Worker) bool { return w.State == catalog.WorkerLost })
	t.Logf("kvm1 killed in its batch (%s), declared lost %s after", ev.Message, time.Since(killed).Round(time.Millisecond))
	workers["kvm3"] = startDatastoreWorker(e, "kvm3", "ds-001", "ds-002")
	second := awaitBatchRun(t, done, srv, workers)
	if second.Status != "success" || second.TasksOK != batchVMs || second.ID != ev.JobID {
		t.Fatalf("the run with a killed worker: %+v (the killed batch was of job %d)\n%s", second, ev.JobID, srv.Log())
	}
	t.Logf("the run with a killed worker ended %s after the kill", time.Since(killed).Round(time.Millisecond))
	mounts = map[string][]string{"ds-001": {"kvm3"}, "ds-002": {"kvm2", "kvm3"}}
	checkBatchTasks(t, cat, second, mounts, 2, 2)
	for _, name := range []string{"kvm2", "kvm3"} {
		checkNothingLeft(t, name, workers[name])
	}
}

// runBatchPolicy runs policy ds through the server, and fails the test with
// every process's log if it does not end within 2 patiences.
func runBatchPolicy(t *testing.T, srv *clitest.ServerProc, token string, workers map[string]*clitest.ServerProc) api.Job {
	t.Helper()
	done := make(chan api.Job, 1)
	go func() { done <- srv.RunPolicy(token, "ds") }()
	return awaitBatchRun(t, done, srv, workers)
}

// awaitBatchRun waits for the run done reports, at most 2 patiences.
func awaitBatchRun(t *testing.T, done <-chan api.Job, srv *clitest.ServerProc, workers map[string]*clitest.ServerProc) api.Job {
	t.Helper()
	select {
	case j := <-done:
		return j
	case <-time.After(2 * patience):
		logs := "server:\n" + srv.Log()
		for name, w := range workers {
			logs += name + ":\n" + w.Log()
		}
		t.Fatalf("the run did not end within %s\n%s", 2*patience, logs)
		return api.Job{}
	}
}

// checkBatchTasks wants every task of job j to have succeeded on a
// worker mounts names for its datastore (its last attempt's event), with
// a point of its own, the catalog to hold runs points of each VM, and
// the tasks of datastore ds-001 to have taken at least attempts.
func checkBatchTasks(t *testing.T, cat catalog.Catalog, j api.Job, mounts map[string][]string, runs, attempts int) {
	t.Helper()
	ctx := context.Background()
	tasks, err := cat.ListTasks(ctx, catalog.TaskFilter{JobID: j.ID})
	if err != nil || len(tasks) != batchVMs {
		t.Fatalf("job %d's tasks: %d, %v", j.ID, len(tasks), err)
	}
	for _, task := range tasks {
		if len(task.Datastores) != 1 {
			t.Fatalf("%s is on datastores %v, want one", task.VMName, task.Datastores)
		}
		ds := task.Datastores[0]
		if ran := ranOn(t, cat, task); task.Status != catalog.StatusSuccess || task.BackupPointID == "" || !slices.Contains(mounts[ds], ran) {
			t.Errorf("%s on %s: %s, point %q, last attempt (%d) ran on %q, want one of %v", task.VMName, ds, task.Status, task.BackupPointID,
				task.Attempts, ran, mounts[ds])
		}
		if ds == "ds-001" && task.Attempts < attempts {
			t.Errorf("%s on %s took %d attempts, want at least %d", task.VMName, ds, task.Attempts, attempts)
		}
		pts, err := cat.ListBackupPoints(ctx, catalog.BackupPointFilter{VMID: task.VMID})
		if err != nil {
			t.Fatal(err)
		}
		if len(pts) != runs {
			t.Errorf("%s has %d points after %d runs", task.VMName, len(pts), runs)
		}
	}
}

// logCount is a count in a log line: key=number.
var logCount = regexp.MustCompile(`\b([a-z_]+)=(\d+)\b`)

// checkNothingLeft wants every simulated connection the worker closed to
// have had no VM snapshot, session or storage snapshot left.
func checkNothingLeft(t *testing.T, name string, w *clitest.ServerProc) {
	t.Helper()
	closed := 0
	for _, line := range strings.Split(w.Log(), "\n") {
		if !strings.Contains(line, "simulated connection closed") {
			continue
		}
		closed++
		counts := map[string]string{}
		for _, m := range logCount.FindAllStringSubmatch(line, -1) {
			counts[m[1]] = m[2]
		}
		for _, k := range []string{"open_sessions", "snapshots_left", "storage_snapshots_left"} {
			if counts[k] != "0" {
				t.Errorf("%s left something behind (%s=%q): %s", name, k, counts[k], line)
			}
		}
	}
	if closed == 0 {
		t.Errorf("%s closed no simulated connection:\n%s", name, w.Log())
	}
}
