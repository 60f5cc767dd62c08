package workercmd_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu/qemutest"
	"github.com/coffer-backup/coffer/internal/qmp"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// guestConfig is one QEMU host, kvm1, with one guest: a qemu connection
// is host-bound (engine.RouteOf), so its units run only on a worker that
// reaches host kvm1 of connection kvm1. One NBD connection per disk keeps
// the read of the guest's 128 MiB of random data long enough to kill the
// worker while it reads.
const guestConfig = `
maintenance: {worker-dead-after: %s}
connections:
  - {name: kvm1, kind: qemu, options: {sockets: [%q], host: kvm1, nbd-connections: 1}}
policies:
  - {name: fleet, connections: [kvm1], schedule: "0 3 1 1 *", snapshot: crash-consistent, retries: {attempts: 3, backoff: 100ms, max-backoff: 100ms}}
`

// guestDiskMiB is the guest's disk, filled with random data before it
// boots (its workload then writes its blocks over some of it).
const guestDiskMiB = 128

// TestKilledWorkerLeavesTheGuestRunning: a worker on host kvm1 (a network
// namespace with that name) backs up the guest running there; SIGKILLed
// mid-backup, it leaves its snapshot's objects in the guest's QEMU, and
// the guest runs on through them. The worker is declared lost; restarted,
// it removes what its killed process left before it takes work, runs the
// retry, and the job succeeds. Nothing of coffer's stays in the QEMU or
// in the worker's state directory but the chain's own bitmap, and the
// retry's point, taken with the guest paused by the test, restores to
// exactly the guest's disk (qemu-img compare).
func TestKilledWorkerLeavesTheGuestRunning(t *testing.T) {
	testutil.RequireBinary(t, "qemu-system-x86_64") // skips where QEMU is missing
	testutil.RequireBinary(t, "qemu-img")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	lab := testutil.NewNetLab(t, "kvm1")
	e := pgEnv(t, testutil.StartPostgresOnLab(t, lab))
	vm, disk := bootBigGuest(t, ctx, e.Dir)
	adm, err := qmp.Dial(ctx, vm.TestQMP)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	e.Config(fmt.Sprintf(guestConfig, dead, vm.QMPPath))
	srv := e.StartServer()
	token := e.AdminToken()
	cat := openCatalog(t, e)
	state := filepath.Join(e.Dir, "kvm1-state") // the worker's, on its host
	w := startGuestWorker(e, lab.Hosts()[0], state)
	waitLog(t, srv, "the engine given kvm1", "the engine places units on the workers", "workers=kvm1")
	watch := watchStatus(ctx, t, adm)

	// Kill the worker once its snapshot is exported, while it reads.
	started := time.Now()
	done := make(chan api.Job, 1)
	go func() { done <- srv.RunPolicy(token, "fleet") }()
	ev := waitEvent(t, cat, started, "kvm1")
	killed := killMidBackup(ctx, t, adm, w, state)
	watch.killedAt(killed)
	t.Logf("worker killed %s after the run started", killed.Sub(started).Round(time.Millisecond))

	// The guest runs on through the leftover snapshot: it writes again.
	if _, _, err := vm.WaitConsoleFrom(ctx, vm.Mark(), "COFFER WROTE"); err != nil {
		t.Fatalf("the guest stopped writing after the kill: %v\n%s", err, vm.Console())
	}
	waitWorker(t, cat, "kvm1", "kvm1 lost", func(w catalog.Worker) bool { return w.State == catalog.WorkerLost })
	waitLog(t, srv, "kvm1's units re-admitted", "a lost worker's running units are re-admitted")
	t.Logf("kvm1 declared lost and its unit re-admitted %s after the kill", time.Since(killed).Round(time.Millisecond))
	watch.stop()

	// Pause the guest: the retry's point must then equal its disk.
	if err := adm.Execute(ctx, "stop", nil, nil); err != nil {
		t.Fatal(err)
	}
	w = startGuestWorker(e, lab.Hosts()[0], state)
	var j api.Job
	select {
	case j = <-done:
	case <-time.After(2 * patience):
		t.Fatalf("the run did not end after kvm1's restart\n%s", srv.Log())
	}
	t.Logf("the run ended %s after the kill: %+v", time.Since(killed).Round(time.Millisecond), j.Status)
	point := retriedPoint(t, cat, j, ev)
	if !strings.Contains(w.Log(), "removed leftover") {
		t.Errorf("the restarted worker did not say it removed its killed process's leftovers:\n%s", w.Log())
	}

	left, err := qemutest.Leftovers(ctx, adm, filepath.Join(state, "qemu"), "fleet@default", "")
	if err != nil || len(left) != 0 {
		t.Fatalf("left behind on kvm1 after the retry: %v %v", left, err)
	}
	restored := filepath.Join(e.Dir, "restored.raw")
	e.Must("restore", point, "--to", restored)
	if out, err := exec.CommandContext(ctx, "qemu-img", "compare", "-U", "-f", "raw", "-F", "qcow2", restored, disk).CombinedOutput(); err != nil {
		t.Fatalf("the retry's point differs from the paused guest's disk: %v %s", err, out)
	}
	if err := adm.Execute(ctx, "cont", nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := vm.WaitConsoleFrom(ctx, vm.Mark(), "COFFER WROTE"); err != nil {
		t.Fatalf("the guest does not write after its resume: %v\n%s", err, vm.Console())
	}
}

// startGuestWorker starts `coffer worker` kvm1 on its host, reaching the
// connection kvm1 and its host kvm1 ("connection/host"), with a state
// directory of its own (its QEMU journals and fleecing overlays).
func startGuestWorker(e *clitest.Env, host *testutil.NetHost, state string) *clitest.ServerProc {
	e.T.Helper()
	login := e.WorkerLogin("kvm1") // made here, in the test's process
	e.Host = host
	defer func() { e.Host = nil }()
	registered := func(s *clitest.ServerProc) bool { return strings.Contains(s.Stderr.String(), "worker registered") }
	return e.StartCoffer(registered, patience, append([]string{"worker", "--name", "kvm1", "--slots", "2", "--reach-connections", "kvm1",
		"--reach-hosts", "kvm1/kvm1", "--state-dir", state, "--heartbeat", beat.String(), "--dead-after", dead.String(),
		"--log-level", "info"}, login...)...)
}

// bootBigGuest boots a guest writing self-verifying blocks on a qcow2
// disk of guestDiskMiB filled with random data; it returns the guest and
// its disk image.
func bootBigGuest(t *testing.T, ctx context.Context, dir string) (*guestvm.VM, string) {
	t.Helper()
	img, err := guestvm.Build(ctx)
	if err != nil {
		if err == guestvm.ErrNoAssets && !testutil.Strict() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	raw, disk := filepath.Join(dir, "kvm1-vm.raw"), filepath.Join(dir, "kvm1-vm.qcow2")
	data := make([]byte, guestDiskMiB<<20)
	_, _ = rand.Read(data)
	if err := os.WriteFile(raw, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(ctx, "qemu-img", "convert", "-f", "raw", "-O", "qcow2", raw, disk).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	_ = os.Remove(raw)
	return startWritingGuest(ctx, t, img, filepath.Join(dir, "kvm1-vm"), "6b1d3c0e-8f53-4b8e-9a51-0d1c2b3a4f71", disk), disk
}

// startWritingGuest boots web-1 on the qcow2 disk, its workload writing
// self-verifying blocks, and waits until it is ready.
func startWritingGuest(ctx context.Context, t *testing.T, img *guestvm.Image, dir, uuid, disk string) *guestvm.VM {
	t.Helper()
	vm, err := guestvm.Start(ctx, img, guestvm.Options{Name: "web-1", UUID: uuid, Dir: dir, Mode: "write", Base: 64,
		Interval: 20 * time.Millisecond, Disks: []guestvm.Disk{{ID: "vda", Path: disk, Format: "qcow2"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	if _, err := vm.WaitConsole(ctx, "COFFER READY"); err != nil {
		t.Fatalf("%v\n%s", err, vm.Console())
	}
	return vm
}

// killMidBackup SIGKILLs the worker once its snapshot of the guest is
// exported (it then reads it), and checks that the kill left the
// snapshot's objects behind: otherwise it came too late to test their
// cleanup.
func killMidBackup(ctx context.Context, t *testing.T, adm *qmp.Client, w *clitest.ServerProc, state string) time.Time {
	t.Helper()
	exported := waitExport(ctx, t, adm)
	if err := w.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = awaitExit(t, w)
	left, err := qemutest.Leftovers(ctx, adm, filepath.Join(state, "qemu"), "fleet@default", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(left) == 0 {
		t.Fatal("the killed worker left nothing behind: it was not killed mid-backup, and the cleanup is not tested")
	}
	t.Logf("killed %s after its snapshot was exported, the worker left on its host: %s",
		killed.Sub(exported).Round(time.Millisecond), strings.Join(left, ", "))
	return killed
}

// waitExport waits until coffer's snapshot of the guest is exported
// (the worker then reads it) and returns when it saw it.
func waitExport(ctx context.Context, t *testing.T, adm *qmp.Client) time.Time {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		var exports []struct {
			ID string `json:"id"`
		}
		if err := adm.Execute(ctx, "query-block-exports", nil, &exports); err != nil {
			t.Fatal(err)
		}
		if len(exports) > 0 {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot of the guest exported within %s", patience)
		}
		time.Sleep(5 * time.Millisecond) // a poll's pace, not a synchronisation
	}
}

// retriedPoint checks the run that lost kvm1: it succeeded, the attempt
// running at the kill (ev) was retried on kvm1, and its task has the
// retry's point, which it returns.
func retriedPoint(t *testing.T, cat catalog.Catalog, j api.Job, ev catalog.Event) string {
	t.Helper()
	if j.Status != "success" || j.ID != ev.JobID || j.TasksOK != 1 {
		t.Fatalf("the run with a killed worker: %+v (the killed attempt was of job %d)", j, ev.JobID)
	}
	ctx := context.Background()
	tasks, err := cat.ListTasks(ctx, catalog.TaskFilter{JobID: j.ID})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("job %d's tasks: %+v %v", j.ID, tasks, err)
	}
	task := tasks[0]
	ran := ranOn(t, cat, task)
	if task.ID != ev.TaskID || task.Attempts < 2 || task.BackupPointID == "" || ran != "kvm1" {
		t.Fatalf("the task killed on kvm1: %+v, its last attempt ran on %q", task, ran)
	}
	return task.BackupPointID
}

// statusWatch polls the guest's run state (query-status) and records its
// STOP and RESUME events, from its start until stop. A crash-consistent
// snapshot stops the guest for the instant of its switch and resumes it;
// apart from that instant the guest must run throughout, and from the
// kill on without any pause at all.
type statusWatch struct {
	t       *testing.T
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	kill    time.Time
	polls   int
	paused  []time.Time // polls that found the guest not running
	stops   []time.Time // STOP events, by QEMU's clock
	resumes []time.Time
}

func watchStatus(ctx context.Context, t *testing.T, adm *qmp.Client) *statusWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &statusWatch{t: t, cancel: cancel, done: make(chan struct{})}
	sub := adm.Subscribe()
	go func() {
		defer close(w.done)
		defer sub.Cancel()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-sub.C:
				w.mu.Lock()
				switch ev.Name {
				case "STOP":
					w.stops = append(w.stops, ev.Time)
				case "RESUME":
					w.resumes = append(w.resumes, ev.Time)
				}
				w.mu.Unlock()
			case <-tick.C:
				var st struct {
					Status string `json:"status"`
				}
				err := adm.Execute(ctx, "query-status", nil, &st)
				w.mu.Lock()
				if err == nil {
					w.polls++
					if st.Status != "running" {
						w.paused = append(w.paused, time.Now())
					}
				}
				w.mu.Unlock()
			}
		}
	}()
	return w
}

func (w *statusWatch) killedAt(at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.kill = at
}

// stop ends the watch and checks what it saw.
func (w *statusWatch) stop() {
	w.t.Helper()
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	var longest time.Duration
	for i, s := range w.stops {
		if i >= len(w.resumes) || w.resumes[i].Before(s) {
			w.t.Fatalf("the guest was stopped at %s and not resumed (stops %v, resumes %v)", s, w.stops, w.resumes)
		}
		if s.After(w.kill) {
			w.t.Fatalf("the guest was stopped at %s, after the kill at %s", s, w.kill)
		}
		longest = max(longest, w.resumes[i].Sub(s))
	}
	for _, p := range w.paused {
		if p.After(w.kill) {
			w.t.Fatalf("query-status found the guest not running at %s, after the kill at %s", p, w.kill)
		}
	}
	if len(w.paused) > 0 && len(w.stops) == 0 {
		w.t.Fatalf("query-status found the guest not running %d times without a STOP event", len(w.paused))
	}
	w.t.Logf("guest status polled %d times: running but for %d polls inside coffer's %d snapshot switch(es), the longest %s; none after the kill",
		w.polls, len(w.paused), len(w.stops), longest)
}
