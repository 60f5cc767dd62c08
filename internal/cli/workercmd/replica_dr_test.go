package workercmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/nbd/qemunbd"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/qmp"
	"github.com/coffer-backup/coffer/internal/replica"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// drConfig is two sites: production, whose QEMU host prod1 runs the
// guest (connection kvm1), and the DR site, whose host dr1 keeps the
// standby (connection dr, which names no guest: it only places the
// replication on dr1's worker).
const drConfig = `
maintenance: {worker-dead-after: %s}
connections:
  - {name: kvm1, kind: qemu, options: {sockets: [%q], host: prod1}}
  - {name: dr, kind: qemu, options: {sockets: [%q], host: dr1}}
policies:
  - {name: fleet, connections: [kvm1], schedule: "0 3 1 1 *", snapshot: crash-consistent, retries: {attempts: 1}}
replications:
  - {name: web-dr, vms: [web-1], connection: dr, directory: %q, keep: 2}
`

// TestStandbyKeptByTheDRSitesWorker: two sites as network namespaces,
// each with its own worker. The guest's backups run on production's
// worker (prod1); the replication, run through the server, runs on the
// DR site's worker (dr1, its host name in the run's document), which
// writes the standby. After each of two runs, with the guest paused for
// its backup and the run, the standby's newest point equals the guest's
// disk (qemu-img compare). Then dr1 is SIGKILLed while it writes the
// third point (its qemu-nbd serving the new overlay): the run fails, the
// standby stays at its second point, every overlay the record names is a
// sound qcow2 and the newest still equals its backup point; restarted,
// dr1 brings the standby to the third point, equal to the paused guest.
// Restarted, dr1 also removes what a killed test failover left in its
// state directory, and spares a test that still runs (its run's lock held).
func TestStandbyKeptByTheDRSitesWorker(t *testing.T) {
	for _, bin := range []string{"qemu-system-x86_64", "qemu-img", "qemu-nbd"} {
		testutil.RequireBinary(t, bin) // skips where QEMU is missing
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	lab := testutil.NewNetLab(t, "prod1", "dr1")
	prod, dr := lab.Hosts()[0], lab.Hosts()[1]
	e := pgEnv(t, testutil.StartPostgresOnLab(t, lab))
	vm, disk := bootBigGuest(t, ctx, e.Dir)
	adm, err := qmp.Dial(ctx, vm.TestQMP)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	standbys := filepath.Join(e.Dir, "dr-site")
	e.Config(fmt.Sprintf(drConfig, steadyDead, vm.QMPPath, filepath.Join(e.Dir, "none", "*.qmp"), standbys))
	srv := e.StartServer()
	token := e.AdminToken()
	startReachWorker(e, prod, "kvm1", "kvm1/prod1", steadyDead)
	w, gate := startGatedWorker(e, dr)
	waitLog(t, srv, "the engine given both workers", "the engine places units on the workers", "workers=dr1,prod1")

	dir := filepath.Join(standbys, "web-1")
	for run := range 2 {
		pauseAndBackUp(ctx, t, adm, vm, srv, token)
		got := replicateOn(t, e, srv, token, "dr1")
		compareNewest(ctx, t, dir, disk, fmt.Sprintf("run %d", run+1))
		if len(got.VMs[0].Points) != run+1 {
			t.Fatalf("run %d: points %+v", run+1, got.VMs[0].Points)
		}
		if err := adm.Execute(ctx, "cont", nil, nil); err != nil {
			t.Fatal(err)
		}
	}

	before, err := replica.LoadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	pauseAndBackUp(ctx, t, adm, vm, srv, token)
	killMidRun(t, e, w, gate, srv, token, dir, before.Seq+1)
	after := soundStandby(ctx, t, e, dir)
	if after.Seq != before.Seq || after.Newest().BackupPoint != before.Newest().BackupPoint {
		t.Fatalf("killed mid-write, the standby moved from point %d (%s) to %d (%s)", before.Seq, before.Newest().BackupPoint,
			after.Seq, after.Newest().BackupPoint)
	}

	dead, live := plantTestFailoverRuns(t, filepath.Join(e.Dir, "dr1-state"))
	startReachWorker(e, dr, "dr", "dr/dr1", steadyDead)
	// Registered, it first cleans up after its killed process: ready,
	// it takes work.
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Fatalf("the restarted worker left a killed test failover's run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(live, "1.0", "vda.qcow2")); err != nil {
		t.Fatalf("the restarted worker removed a live test failover's overlay: %v", err)
	}
	waitWorker(t, openCatalog(t, e), "dr1", "dr1 ready again", func(w catalog.Worker) bool { return w.State == catalog.WorkerReady && w.Epoch > 1 })
	got := replicateOn(t, e, srv, token, "dr1")
	if got.VMs[0].Points[len(got.VMs[0].Points)-1].Seq <= before.Seq {
		t.Fatalf("the run after the kill made no new point: %+v", got.VMs[0].Points)
	}
	compareNewest(ctx, t, dir, disk, "the run after the kill")
	if err := adm.Execute(ctx, "cont", nil, nil); err != nil {
		t.Fatal(err)
	}
}

// pauseAndBackUp lets the guest write once more, pauses it, and backs it
// up through the server (on prod1's worker).
func pauseAndBackUp(ctx context.Context, t *testing.T, adm *qmp.Client, vm *guestvm.VM, srv *clitest.ServerProc, token string) {
	t.Helper()
	if _, _, err := vm.WaitConsoleFrom(ctx, vm.Mark(), "COFFER WROTE"); err != nil {
		t.Fatalf("the guest does not write: %v\n%s", err, vm.Console())
	}
	if err := adm.Execute(ctx, "stop", nil, nil); err != nil {
		t.Fatal(err)
	}
	if j := srv.RunPolicy(token, "fleet"); j.Status != "success" || j.TasksOK != 1 {
		t.Fatalf("run fleet: %+v\n%s", j, srv.Log())
	}
}

// replicateOn runs the replication through the server and wants it to
// have run on host.
func replicateOn(t *testing.T, e *clitest.Env, srv *clitest.ServerProc, token, host string) api.ReplicationRun {
	t.Helper()
	code, stdout, stderr := e.Remote(srv, token, "replicas", "run", "web-dr", "--json")
	var run api.ReplicationRun
	if code != 0 || json.Unmarshal([]byte(stdout), &run) != nil || len(run.VMs) != 1 || run.VMs[0].Error != "" {
		t.Fatalf("replicas run through the server: exit %d\n%s\n%s\nserver:\n%s", code, stdout, stderr, srv.Log())
	}
	if run.Host != host {
		t.Fatalf("the replication ran on host %q, not on the DR site's %s", run.Host, host)
	}
	return run
}

// compareNewest wants the standby's newest point to equal the paused
// guest's disk.
func compareNewest(ctx context.Context, t *testing.T, dir, disk, what string) {
	t.Helper()
	st, err := replica.LoadState(dir)
	if err != nil || st.Newest() == nil {
		t.Fatalf("%s: the standby's record: %+v %v", what, st, err)
	}
	top := st.Newest().Disks[0].File
	if out, err := exec.CommandContext(ctx, "qemu-img", "compare", "-U", "-f", "qcow2", "-F", "qcow2", top, disk).CombinedOutput(); err != nil {
		t.Fatalf("%s: the standby's point %d differs from the paused guest's disk: %v %s", what, st.Newest().Seq, err, out)
	}
}

// killMidRun opens the DR worker's gate, runs the replication through
// the server, kills the worker while the run writes the standby's next
// overlay (point seq) and wants the run to fail for the worker's loss.
func killMidRun(t *testing.T, e *clitest.Env, w *clitest.ServerProc, gate string, srv *clitest.ServerProc, token, dir string, seq int) {
	t.Helper()
	if err := os.Remove(gate); err != nil {
		t.Fatal(err)
	}
	failed := make(chan string, 1)
	go func() {
		code, stdout, stderr := e.Remote(srv, token, "replicas", "run", "web-dr", "--json")
		failed <- fmt.Sprintf("exit %d: %s%s", code, stdout, stderr)
	}()
	killWhileWriting(t, w, dir)
	left, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("disk-*-%06d.qcow2", seq)))
	if len(left) == 0 {
		t.Fatal("the killed worker left no overlay of the next point: it was not killed mid-write")
	}
	select {
	case got := <-failed:
		// The server hears of the loss: the run was handed to dr1 by
		// ID, and nothing retries it.
		if !strings.Contains(got, "worker dr1 was lost while it ran run-replication") {
			t.Fatalf("the replication whose worker was killed: %s", got)
		}
	case <-time.After(2 * patience):
		t.Fatalf("the replication whose worker was killed did not end\n%s", srv.Log())
	}
}

// startGatedWorker starts the DR site's worker, which reads the
// repository's data while the gate file it returns exists: removed, it
// holds a run in its reads, with the standby's next overlay made and
// served, until the test kills it.
func startGatedWorker(e *clitest.Env, dr *testutil.NetHost) (*clitest.ServerProc, string) {
	e.T.Helper()
	gate := filepath.Join(e.Dir, "dr1-reads")
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		e.T.Fatal(err)
	}
	e.Vars["COFFER_TEST_GATE_READS"] = gate
	// Empty, not deleted: Env.Run has put the variable in this process's
	// environment, which later children (the restarted worker) inherit.
	defer func() { e.Vars["COFFER_TEST_GATE_READS"] = "" }()
	return startReachWorker(e, dr, "dr", "dr/dr1", steadyDead), gate
}

// killWhileWriting SIGKILLs the worker once it serves a new overlay of
// the standby with qemu-nbd (held there by its gated reads), waits for
// its exit, and wants the qemu-nbd gone with it (a killed worker leaves
// nothing holding the standby).
func killWhileWriting(t *testing.T, w *clitest.ServerProc, dir string) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for len(qemunbd.Serving(dir)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the DR worker never wrote an overlay within %s:\n%s", patience, w.Log())
		}
		time.Sleep(10 * time.Millisecond) // a poll's pace: the gate holds the run where it is
	}
	if err := w.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = awaitExit(t, w)
	for gone := time.Now().Add(time.Minute); len(qemunbd.Serving(dir)) > 0; {
		if time.Now().After(gone) {
			t.Fatalf("the killed worker's qemu-nbd %v still serves the standby a minute later", qemunbd.Serving(dir))
		}
		time.Sleep(10 * time.Millisecond) // a poll's pace for a process's exit
	}
}

// soundStandby checks the standby as a failover would find it: every
// overlay its record names is a sound qcow2, and its newest point equals
// the backup point it names (against a restore of it).
func soundStandby(ctx context.Context, t *testing.T, e *clitest.Env, dir string) *replica.State {
	t.Helper()
	st, err := replica.LoadState(dir)
	if err != nil || st.Newest() == nil {
		t.Fatalf("the standby's record: %+v, %v", st, err)
	}
	for _, p := range st.Points {
		for _, d := range p.Disks {
			if out, err := exec.CommandContext(ctx, "qemu-img", "check", "-q", "-U", "-f", "qcow2", d.File).CombinedOutput(); err != nil {
				t.Fatalf("qemu-img check %s (point %d): %v %s", d.File, p.Seq, err, out)
			}
		}
	}
	restored := filepath.Join(e.Dir, "restored.raw")
	_ = os.Remove(restored)
	e.Must("restore", st.Newest().BackupPoint, "--to", restored)
	if out, err := exec.CommandContext(ctx, "qemu-img", "compare", "-U", "-f", "qcow2", "-F", "raw", st.Newest().Disks[0].File, restored).CombinedOutput(); err != nil {
		t.Fatalf("the standby's newest point %d differs from its backup point: %v %s", st.Newest().Seq, err, out)
	}
	return st
}

// plantTestFailoverRuns makes two test failover run directories in the
// state directory, each with an overlay: a killed run's (its lock free)
// and a live run's, whose lock this process holds until the test ends,
// as a `coffer failover test` still running would.
func plantTestFailoverRuns(t *testing.T, state string) (dead, live string) {
	t.Helper()
	dead, live = filepath.Join(state, "failover-tests", "dead"), filepath.Join(state, "failover-tests", "live")
	for _, d := range []string{dead, live} {
		if err := os.MkdirAll(filepath.Join(d, "1.0"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "1.0", "vda.qcow2"), []byte("overlay"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.OpenFile(filepath.Join(live, "run.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &unix.Flock_t{Type: unix.F_WRLCK}); err != nil {
		t.Fatal(err)
	}
	return dead, live
}
