package workercmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/fake"
	"github.com/coffer-backup/coffer/internal/server"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// singleConfig is a simulated KVM estate of two hosts (kind fake-kvm,
// routed as QEMU is: each VM to the worker of its host). Policy kvm
// protects every VM with a host hook that records which process ran it
// ($PPID: the coffer process that runs the backup). The schedule (once a
// year) only makes the server open the connection, so that a backup
// through its API runs in its engine.
const singleConfig = `
maintenance: {worker-dead-after: %[1]s}
connections:
  - {name: kvm, kind: fake-kvm, options: {seed: %[2]d, vms: %[3]d, hosts: 2, datastores: 2, disk-size: 256KiB, snapshot-create: 100ms}}
policies:
  - name: kvm
    connection: kvm
    schedule: "0 3 1 1 *"
    hooks: [{name: mark, where: host, pre: [/bin/sh, -c, 'echo "$PPID" >> %[4]s']}]
`

const (
	singleSeed = 5
	singleVMs  = 6
)

// singleHome is the worker on each host of connection kvm.
var singleHome = map[string]string{"host-01": "kvm1", "host-02": "kvm2"}

// TestBackupOfOneVMRunsOnItsHostsWorker: a backup of one VM through the
// server (`coffer backup vm --server`), which is no policy's run, is
// placed as a policy's VM is, on the worker of the VM's host, and runs
// there with the hooks of the policy protecting the VM; the server
// records one job with one task and one point, and the point restores
// the VM's disk byte for byte. With that worker lost, a backup of the VM
// through the API waits and says why ("no worker reaches host host-02"),
// then runs on the worker once it is back.
func TestBackupOfOneVMRunsOnItsHostsWorker(t *testing.T) {
	e := pgEnv(t, testutil.StartPostgres(t))
	hookLog := filepath.Join(e.Dir, "hook.log")
	e.Config(fmt.Sprintf(singleConfig, dead, singleSeed, singleVMs, hookLog))
	srv := e.StartServer()
	token := e.AdminToken()
	cat := openCatalog(t, e)
	workers := map[string]*clitest.ServerProc{}
	for host, name := range singleHome {
		workers[name] = startHostWorker(e, name, host)
	}
	waitLog(t, srv, "the engine given both workers", "the engine places units on the workers", "workers=kvm1,kvm2")
	vm := vmOnHost(t, "host-02")

	started := time.Now()
	code, stdout, stderr := e.Remote(srv, token, "backup", "vm", "--connection", "kvm", vm.Name, "--json")
	var pt api.BackupPoint
	if code != 0 || json.Unmarshal([]byte(stdout), &pt) != nil || pt.ID == "" {
		t.Fatalf("coffer backup vm %s through the server: exit %d\n%s\n%s\nserver:\n%s", vm.Name, code, stdout, stderr, srv.Log())
	}
	t.Logf("the backup of %s through the server took %s", vm.Name, time.Since(started).Round(time.Millisecond))
	job := checkOneVMJob(t, cat, vm, pt.ID, 1)
	if log := workers["kvm2"].Log(); !strings.Contains(log, "VM unit starts") || !strings.Contains(log, vm.Name) {
		t.Errorf("kvm2, the worker of %s's host, does not log its unit:\n%s", vm.Name, log)
	}
	if log := workers["kvm1"].Log(); strings.Contains(log, "VM unit starts") {
		t.Errorf("kvm1, on the other host, ran a unit:\n%s", log)
	}
	if ran := hookRuns(t, hookLog); len(ran) != 1 || ran[0] != workers["kvm2"].Cmd.Process.Pid {
		t.Errorf("the policy's hook ran in processes %v, want kvm2's (%d) once (server %d)", ran, workers["kvm2"].Cmd.Process.Pid, srv.Cmd.Process.Pid)
	}
	checkRestores(t, e, vm, pt.ID)
	t.Logf("job %d: one task on kvm2, point %s restored byte for byte", job.ID, pt.ShortID)

	// kvm2 lost: a backup of its host's VM waits for it, saying why.
	w2 := workers["kvm2"]
	if err := w2.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = awaitExit(t, w2)
	waitWorker(t, cat, "kvm2", "kvm2 lost", func(w catalog.Worker) bool { return w.State == catalog.WorkerLost })
	since := time.Now()
	done := make(chan apiResult, 1)
	go func() { done <- backupVMOverAPI(srv, token, vm.Name) }()
	waits := waitNoWorker(t, cat, since)
	if !strings.Contains(waits.Message, "no worker reaches host host-02") {
		t.Fatalf("the backup waits: %q, want it to say that no worker reaches host host-02", waits.Message)
	}
	t.Logf("with kvm2 lost, the backup of %s waits: %s", vm.Name, waits.Message)
	workers["kvm2"] = startHostWorker(e, "kvm2", "host-02")
	var res apiResult
	select {
	case res = <-done:
	case <-time.After(2 * patience):
		t.Fatalf("the backup did not end after kvm2's return\n%s", srv.Log())
	}
	var second api.BackupPoint
	if res.code != http.StatusOK || json.Unmarshal(res.body, &second) != nil || second.ID == "" {
		t.Fatalf("the backup of %s after kvm2's return: %d %s\n%s", vm.Name, res.code, res.body, srv.Log())
	}
	t.Logf("it ran %s after the wait began, once kvm2 was back", time.Since(since).Round(time.Millisecond))
	checkOneVMJob(t, cat, vm, second.ID, 2)
}

// startHostWorker starts a worker on host of connection kvm.
func startHostWorker(e *clitest.Env, name, host string) *clitest.ServerProc {
	e.T.Helper()
	registered := func(s *clitest.ServerProc) bool { return strings.Contains(s.Stderr.String(), "worker registered") }
	return e.StartCoffer(registered, patience, append([]string{"worker", "--name", name, "--slots", "2", "--reach-connections", "kvm",
		"--reach-hosts", "kvm/" + host, "--heartbeat", beat.String(), "--dead-after", dead.String(), "--log-level", "info"},
		e.WorkerLogin(name)...)...)
}

// singleFleet is the simulated estate as the test process makes it: the
// same seed and options give the same VMs and disk contents as the
// workers'.
func singleFleet() *fake.Connector {
	return fake.New(fake.Options{Kind: "fake-kvm", Seed: singleSeed, VMs: singleVMs, Hosts: 2, Datastores: 2, DiskSize: 256 << 10})
}

// vmOnHost is a VM of the estate on host.
func vmOnHost(t *testing.T, host string) hypervisor.VM {
	t.Helper()
	vms, err := singleFleet().Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, vm := range vms {
		if vm.Host == host {
			return vm
		}
	}
	t.Fatalf("no VM of seed %d on %s", singleSeed, host)
	return hypervisor.VM{}
}

// checkOneVMJob wants the n-th backup-vm job to have succeeded with one
// task, whose last attempt ran on the worker of the VM's host (its event
// in the task's log) and made point, and the catalog to hold n points of
// the VM, point among them. It returns the job.
func checkOneVMJob(t *testing.T, cat catalog.Catalog, vm hypervisor.VM, point string, n int) catalog.Job {
	t.Helper()
	ctx := context.Background()
	jobs, err := cat.ListJobs(ctx, catalog.JobFilter{Kind: catalog.KindBackupVM})
	if err != nil || len(jobs) != n {
		t.Fatalf("backup-vm jobs after %d backups: %+v, %v", n, jobs, err)
	}
	job := jobs[0]
	for _, j := range jobs {
		if j.ID > job.ID {
			job = j
		}
	}
	tasks, err := cat.ListTasks(ctx, catalog.TaskFilter{JobID: job.ID})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("job %d's tasks: %+v, %v", job.ID, tasks, err)
	}
	task := tasks[0]
	ran := ranOn(t, cat, task)
	if job.Status != catalog.StatusSuccess || task.Status != catalog.StatusSuccess || task.BackupPointID != point || ran != singleHome[vm.Host] {
		t.Errorf("job %d (%s): %s/%s %s, point %q (want %s), last attempt (%d) ran on %q, want %s", job.ID, job.Status, task.Connection,
			task.VMName, task.Status, task.BackupPointID, point, task.Attempts, ran, singleHome[vm.Host])
	}
	pts, err := cat.ListBackupPoints(ctx, catalog.BackupPointFilter{VMID: vm.ID})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range pts {
		found = found || p.ID == point
	}
	if len(pts) != n || !found {
		t.Errorf("%s has %d points after %d backups (%s among them: %v)", vm.Name, len(pts), n, point, found)
	}
	return job
}

// hookRuns are the processes the hook ran in, in order.
func hookRuns(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the hook never ran: %v", err)
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("hook log %q: %v", b, err)
		}
		out = append(out, pid)
	}
	return out
}

// checkRestores restores the point's disk from the repository and wants
// it byte for byte the VM's disk as the simulated estate holds it.
func checkRestores(t *testing.T, e *clitest.Env, vm hypervisor.VM, point string) {
	t.Helper()
	to := filepath.Join(t.TempDir(), "disk.raw")
	e.Must("restore", point, "--disk", "0", "--to", to)
	got, err := os.ReadFile(to)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sess, err := singleFleet().Snapshot(ctx, vm.VMRef, hypervisor.SnapshotRequest{SessionID: "check"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = sess.Close(ctx, true) }()
	r, err := sess.OpenDisk(ctx, vm.Disks[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	want := make([]byte, r.Size())
	if _, err := r.ReadAt(want, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the restored disk (%d bytes) differs from %s's (%d bytes)", len(got), vm.Name, len(want))
	}
}

type apiResult struct {
	code int
	body []byte
}

// backupVMOverAPI backs VM vm of connection kvm up through the server's
// API, from any goroutine.
func backupVMOverAPI(srv *clitest.ServerProc, token, vm string) apiResult {
	req, err := http.NewRequest("POST", srv.URL+server.Prefix+"/repositories/default/backups/vm/kvm/"+vm, strings.NewReader("{}"))
	if err != nil {
		return apiResult{body: []byte(err.Error())}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := srv.Client().Do(req)
	if err != nil {
		return apiResult{body: []byte(err.Error())}
	}
	defer func() { _ = res.Body.Close() }()
	b, _ := io.ReadAll(res.Body)
	return apiResult{code: res.StatusCode, body: b}
}

// waitNoWorker waits for a unit queued after since to say why no worker
// can run it.
func waitNoWorker(t *testing.T, cat catalog.Catalog, since time.Time) catalog.Event {
	t.Helper()
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		evs, err := cat.ListEvents(context.Background(), catalog.EventFilter{Since: since})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Kind == "no-worker" {
				return ev
			}
		}
		time.Sleep(20 * time.Millisecond) // a poll's pace, not a synchronisation
	}
	t.Fatalf("no unit said why it waits within %s", patience)
	return catalog.Event{}
}
