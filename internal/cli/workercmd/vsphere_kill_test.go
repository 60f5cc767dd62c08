package workercmd_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/mo"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
	"github.com/coffer-backup/coffer/internal/testutil/vclab"
)

// vsphereRetry is one policy over the lab's VM with retries, so that the
// attempt of a killed worker is run again elsewhere.
const vsphereRetry = `policies:
  - {name: fleet, connections: [vc], schedule: "0 3 1 1 *", retries: {attempts: 3, backoff: 100ms, max-backoff: 100ms}}
`

// readHold holds the datastore reads of the first client that reads, until
// its connection ends or the test does: that client's backup stays
// mid-read, its VM snapshot taken. Other clients read freely.
type readHold struct {
	mu      sync.Mutex
	held    string        // the held client's address
	first   chan string   // receives it once
	release chan struct{} // closed at the test's end
}

func newReadHold(t *testing.T) *readHold {
	h := &readHold{first: make(chan string, 1), release: make(chan struct{})}
	t.Cleanup(func() { close(h.release) })
	return h
}

func (h *readHold) beforeRead(r *http.Request) {
	addr, _, _ := net.SplitHostPort(r.RemoteAddr)
	h.mu.Lock()
	if h.held == "" {
		h.held = addr
		h.first <- addr
	}
	hold := h.held == addr
	h.mu.Unlock()
	if hold {
		select {
		case <-r.Context().Done(): // the client is gone
		case <-h.release:
		}
	}
}

// TestKilledVSphereWorkersSnapshotIsRemovedElsewhere: two workers reach a
// simulated vCenter. The one that runs the VM's unit is SIGKILLed while
// it reads the VM's snapshot (the test holds its datastore reads), and
// stays dead. The leader declares it lost and the retry runs on the other
// worker, which finds the dead registration's coffer snapshot on the VM,
// removes it (the task's log says so, unless the leader's cleanup of the
// lost worker removed it first: the leader's log then says so) and backs
// the VM up: the job
// succeeds, its point restores to the VM's disk, and the VM keeps no
// snapshot. The killed worker, started again afterwards, drops its
// journal of that snapshot when it cleans up before it registers.
func TestKilledVSphereWorkersSnapshotIsRemovedElsewhere(t *testing.T) {
	lab := testutil.NewNetLab(t, "proxy1", "proxy2")
	e := pgEnv(t, testutil.StartPostgresOnLab(t, lab))
	hold := newReadHold(t)
	vc := clitest.NewVCLab(t, vclab.StartReading(t, lab.Gateway, nil, 2, 0, hold.beforeRead))
	want := make([]byte, vclab.DiskSize)
	_, _ = rand.Read(want[:vclab.DiskSize/2])
	vc.WriteFlat(vc.Disk("app-01"), want)
	e.Config(fmt.Sprintf("maintenance: {worker-dead-after: %s}\n", dead) + vc.Connections(e) + vsphereRetry)
	cat := openCatalog(t, e)
	workers := map[string]*clitest.ServerProc{}
	byAddr := map[string]string{}
	for _, h := range lab.Hosts() {
		workers[h.Name] = startReachWorker(e, h, "vc", "", dead)
		byAddr[h.Addr] = h.Name
		waitWorker(t, cat, h.Name, h.Name+" ready", func(w catalog.Worker) bool { return w.State == catalog.WorkerReady })
	}
	srv := e.StartServer()
	token := e.AdminToken()
	waitLog(t, srv, "the engine given both workers", "the engine places units on the workers", "workers=proxy1,proxy2")

	started := time.Now()
	done := make(chan api.Job, 1)
	go func() { done <- srv.RunPolicy(token, "fleet") }()
	killed, snapshot := killTheReader(t, hold, vc, srv, workers, byAddr)
	t.Logf("killed %s %s after the run started, mid-read of snapshot %s", killed, time.Since(started).Round(time.Millisecond), snapshot)

	var j api.Job
	select {
	case j = <-done:
	case <-time.After(2 * patience):
		t.Fatalf("the run did not end without %s\n%s", killed, srv.Log())
	}
	t.Logf("the run ended %s after it started: %s", time.Since(started).Round(time.Millisecond), j.Status)
	if j.Status != "success" || j.TasksOK != 1 {
		t.Fatalf("the run with %s killed: %+v\n%s", killed, j, srv.Log())
	}
	tasks, err := cat.ListTasks(context.Background(), catalog.TaskFilter{JobID: j.ID})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("job %d's tasks: %+v %v", j.ID, tasks, err)
	}
	task := tasks[0]
	other := ranOn(t, cat, task)
	if task.Attempts < 2 || other == killed || other == "" {
		t.Fatalf("the task: %d attempts, the last on %q; want a retry off %s", task.Attempts, other, killed)
	}
	// The retry removes the dead registration's snapshot, unless the
	// leader's cleanup of the lost worker (on the same live worker) was
	// first: one of the two says so.
	removed := removalNotes(t, cat, task, snapshot)
	byCleanup := cleanedUp(srv.Log(), snapshot)
	if len(removed) == 0 && !byCleanup || len(removed) > 1 || len(removed) == 1 && !strings.Contains(removed[0], "left by worker "+killed+" epoch ") {
		t.Errorf("the task's log on the removal of %s: %q; removed by the cleanup of the lost worker: %v", snapshot, removed, byCleanup)
	}
	t.Logf("attempt %d, on %s: %s (removed by the lost worker's cleanup: %v)", task.Attempts, other, strings.Join(removed, "; "), byCleanup)
	restored := filepath.Join(e.Dir, "app-01.raw")
	e.Must("restore", task.BackupPointID, "--to", restored)
	if got, err := os.ReadFile(restored); err != nil || !bytes.Equal(got, want) {
		t.Errorf("the retry's point differs from the VM's disk: %v", err)
	}
	if ws, err := cat.ListWorkers(context.Background()); err != nil || !lostIn(ws, killed) {
		t.Errorf("%s came back or is not lost: %+v %v", killed, ws, err)
	}

	noSnapshots(t, vc)
	checkReturn(t, e, lab, killed)
}

// checkReturn starts the killed worker again: before it registers, its
// cleanup drops its journal of the snapshot the retry removed, and
// leaves nothing on the VM.
func checkReturn(t *testing.T, e *clitest.Env, lab *testutil.NetLab, killed string) {
	t.Helper()
	journals := func() []string {
		js, err := filepath.Glob(filepath.Join(e.Dir, killed+"-state", "vsphere", "vc", "journal", "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	if js := journals(); len(js) != 1 {
		t.Fatalf("%s's journals of snapshots while it is dead: %v", killed, js)
	}
	for _, h := range lab.Hosts() {
		if h.Name == killed {
			w := startReachWorker(e, h, "vc", "", dead)
			if js := journals(); len(js) != 0 {
				t.Errorf("%s, back and registered, keeps its journals: %v\n%s", killed, js, w.Log())
			}
		}
	}
}

// killTheReader SIGKILLs the worker whose datastore reads hold holds,
// once it reads, with the VM's coffer snapshot taken; it returns the
// worker's name and the snapshot's.
func killTheReader(t *testing.T, hold *readHold, vc *clitest.VCLab, srv *clitest.ServerProc, workers map[string]*clitest.ServerProc,
	byAddr map[string]string) (killed, snapshot string) {
	t.Helper()
	select {
	case addr := <-hold.first:
		killed = byAddr[addr]
	case <-time.After(patience):
		t.Fatalf("no worker read the VM's disk within %s\n%s", patience, srv.Log())
	}
	if killed == "" {
		t.Fatalf("a client that is no worker read the VM's disk: %v", byAddr)
	}
	left := cofferSnapshots(t, vc)
	if len(left) != 1 {
		t.Fatalf("the VM's coffer snapshots while %s reads it: %v", killed, left)
	}
	victim := workers[killed]
	if err := victim.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = awaitExit(t, victim)
	return killed, left[0]
}

// noSnapshots: no VM of the lab keeps a snapshot.
func noSnapshots(t *testing.T, vc *clitest.VCLab) {
	t.Helper()
	var vms []mo.VirtualMachine
	vc.Retrieve(context.Background(), "VirtualMachine", []string{"name", "snapshot"}, &vms)
	for _, vm := range vms {
		if vm.Snapshot != nil {
			t.Errorf("%s keeps snapshots: %+v", vm.Name, vm.Snapshot.RootSnapshotList)
		}
	}
}

// cofferSnapshots are the names of the coffer snapshots of the lab's VMs.
func cofferSnapshots(t *testing.T, vc *clitest.VCLab) []string {
	t.Helper()
	var vms []mo.VirtualMachine
	vc.Retrieve(context.Background(), "VirtualMachine", []string{"name", "snapshot"}, &vms)
	var out []string
	for _, vm := range vms {
		if vm.Snapshot == nil {
			continue
		}
		for _, s := range vm.Snapshot.RootSnapshotList {
			if strings.HasPrefix(s.Name, "coffer-") {
				out = append(out, s.Name)
			}
		}
	}
	return out
}

// removalNotes are the task's events that say snapshot was removed.
func removalNotes(t *testing.T, cat catalog.Catalog, task catalog.Task, snapshot string) []string {
	t.Helper()
	evs, err := cat.ListEvents(context.Background(), catalog.EventFilter{JobID: task.JobID, TaskID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		if strings.Contains(ev.Message, "removed coffer snapshot "+snapshot) {
			out = append(out, ev.Message)
		}
	}
	return out
}

func lostIn(ws []catalog.Worker, name string) bool {
	for _, w := range ws {
		if w.Name == name {
			return w.State == catalog.WorkerLost
		}
	}
	return false
}

// cleanedUp reports whether a leader's log says the cleanup of a lost
// worker removed snapshot.
func cleanedUp(log, snapshot string) bool {
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "a lost worker's snapshots were cleaned up") && strings.Contains(line, snapshot) {
			return true
		}
	}
	return false
}
