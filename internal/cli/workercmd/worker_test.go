package workercmd_test

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/fleet"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// Short timings for the worker processes: renew every 200 ms, declared
// lost after 2 s (so fenced after 1 s without a renewal).
const (
	beat     = 200 * time.Millisecond
	dead     = 2 * time.Second
	patience = time.Minute // bounds every wait: only catches a hang
)

// startWorker starts `coffer worker` as a process, with a token of its
// own, and waits until it has registered.
func startWorker(e *clitest.Env, name string, args ...string) *clitest.ServerProc {
	e.T.Helper()
	registered := func(s *clitest.ServerProc) bool {
		return strings.Contains(s.Stderr.String(), "worker registered")
	}
	return e.StartCoffer(registered, patience, append([]string{"worker", "--name", name, "--slots", "2",
		"--reach-connections", "lab", "--reach-hosts", name, "--heartbeat", beat.String(), "--dead-after", dead.String(),
		"--log-level", "info"}, append(e.WorkerLogin(name), args...)...)...)
}

// openCatalog opens the env's catalog as another process would.
func openCatalog(t *testing.T, e *clitest.Env) catalog.Catalog {
	t.Helper()
	cat, err := catalogopen.Open(context.Background(), e.Vars["COFFER_CATALOG"])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.Close() })
	return cat
}

// waitWorker polls the registry until cond holds on the named worker
// (its zero value when it is not registered).
func waitWorker(t *testing.T, cat catalog.Catalog, name, what string, cond func(catalog.Worker) bool) catalog.Worker {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		ws, err := cat.ListWorkers(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var w catalog.Worker
		for _, x := range ws {
			if x.Name == name {
				w = x
			}
		}
		if cond(w) {
			return w
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; worker %+v", what, patience, w)
		}
		time.Sleep(20 * time.Millisecond) // a poll's pace, not a synchronisation
	}
}

// awaitExit waits for a worker process to end and returns how.
func awaitExit(t *testing.T, w *clitest.ServerProc) error {
	t.Helper()
	select {
	case err := <-w.Done:
		return err
	case <-time.After(patience):
		t.Fatalf("the worker did not exit:\n%s", w.Log())
		return nil
	}
}

func pgEnv(t *testing.T, dsn string) *clitest.Env {
	e := clitest.NewEnv(t)
	e.Vars["COFFER_CATALOG"] = dsn
	e.Must("init")
	e.Config("maintenance:\n  worker-dead-after: " + dead.String() + "\n")
	return e
}

// A worker killed with SIGKILL stops renewing: the leading server's watch
// declares it lost within the dead interval and a look.
func TestKilledWorkerIsDeclaredLost(t *testing.T) {
	e := pgEnv(t, testutil.StartPostgres(t))
	srv := e.StartServer()
	token := e.AdminToken()
	cat := openCatalog(t, e)
	w := startWorker(e, "kvm1")
	ready := waitWorker(t, cat, "kvm1", "worker ready", func(w catalog.Worker) bool { return w.State == catalog.WorkerReady })
	if ready.Slots != 2 || ready.Protocol != fleet.Protocol || ready.Epoch != 1 || len(ready.Reach.Hosts) != 1 {
		t.Fatalf("registered: %+v", ready)
	}
	if err := w.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = awaitExit(t, w)
	lost := waitWorker(t, cat, "kvm1", "worker lost", func(w catalog.Worker) bool { return w.State == catalog.WorkerLost })
	took := time.Since(killed)
	// The watch looks every tenth of the dead interval; the poll adds 20 ms.
	if took > dead+dead/10+time.Second || time.Since(lost.HeartbeatAt) < dead {
		t.Fatalf("declared lost %s after the kill, %s after its last heartbeat (dead after %s)", took, time.Since(lost.HeartbeatAt), dead)
	}
	t.Logf("declared lost %s after the kill", took.Round(time.Millisecond))
	// The leader's gauges follow within a look of the watch.
	deadline := time.Now().Add(patience)
	for !strings.Contains(srv.Metrics(token), `coffer_worker_state{state="lost",worker="kvm1"} 1`) {
		if time.Now().After(deadline) {
			t.Fatalf("the metrics do not show kvm1 lost:\n%s", srv.Metrics(token))
		}
		time.Sleep(dead / 10) // a poll's pace
	}
}

// A drain through the API reaches the worker with its next heartbeat: it
// finishes, deregisters and exits 0. The listing shows it before.
func TestDrainThroughTheAPIEndsTheWorker(t *testing.T) {
	e := pgEnv(t, testutil.StartPostgres(t))
	srv := e.StartServer()
	token := e.AdminToken()
	cat := openCatalog(t, e)
	w := startWorker(e, "kvm2", "--reach-repositories", "default", "--can-boot")
	waitWorker(t, cat, "kvm2", "worker ready", func(w catalog.Worker) bool { return w.State == catalog.WorkerReady })

	code, out, errOut := e.Remote(srv, token, "workers", "--json")
	if code != 0 {
		t.Fatalf("workers --json: exit %d\n%s%s", code, out, errOut)
	}
	ws := clitest.Decode[[]api.Worker](t, out)
	if len(ws) != 1 || ws[0].Name != "kvm2" || ws[0].State != "ready" || ws[0].Slots != 2 || !ws[0].Reach.CanBoot ||
		ws[0].Reach.Repositories[0] != "default" || ws[0].Reach.Libraries == nil || ws[0].AgeSeconds > dead.Seconds() {
		t.Fatalf("workers: %+v", ws)
	}
	code, out, _ = e.Remote(srv, token, "workers")
	if code != 0 || !strings.Contains(out, "kvm2") || !strings.Contains(out, "0/2") || !strings.Contains(out, "can boot") {
		t.Fatalf("workers: exit %d\n%s", code, out)
	}

	// An auditor of the system sees the workers and cannot drain them.
	auditor := strings.TrimSpace(e.Must("token", "create", "--user", "admin", "--grant", "/system=Auditor", "--lifetime", "1d"))
	if code, out, errOut := e.Remote(srv, auditor, "workers", "--json"); code != 0 || len(clitest.Decode[[]api.Worker](t, out)) != 1 {
		t.Fatalf("workers as an auditor: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := e.Remote(srv, auditor, "workers", "drain", "kvm2"); code != 3 {
		t.Fatalf("drain as an auditor: exit %d, want 3\n%s", code, errOut)
	}

	code, out, errOut = e.Remote(srv, token, "workers", "drain", "kvm2")
	if code != 0 || !strings.Contains(out, "worker kvm2 draining") {
		t.Fatalf("workers drain: exit %d\n%s%s", code, out, errOut)
	}
	if err := awaitExit(t, w); err != nil {
		t.Fatalf("the drained worker: %v\n%s", err, w.Log())
	}
	waitWorker(t, cat, "kvm2", "worker deregistered", func(w catalog.Worker) bool { return w.Name == "" })
	if code, _, errOut := e.Remote(srv, token, "workers", "drain", "kvm2"); code != 7 {
		t.Fatalf("drain of a worker gone: exit %d, want 7\n%s", code, errOut)
	}
}

// A worker that cannot reach its catalog (PostgreSQL stopped) fences
// itself within half the dead interval of its last renewal, and exits 1.
func TestCutOffWorkerFencesItself(t *testing.T) {
	dsn, stop, err := testutil.LaunchPostgres(testutil.PostgresBinDir(t), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	e := pgEnv(t, dsn)
	cat := openCatalog(t, e)
	w := startWorker(e, "kvm3")
	waitWorker(t, cat, "kvm3", "worker ready", func(w catalog.Worker) bool { return w.State == catalog.WorkerReady })
	stop()
	stopped := time.Now()
	err = awaitExit(t, w)
	took := time.Since(stopped)
	if err == nil || !strings.Contains(w.Log(), "fenced itself") {
		t.Fatalf("the cut-off worker exited with %v:\n%s", err, w.Log())
	}
	if took > dead {
		t.Fatalf("fenced %s after the catalog stopped, want within %s", took, dead/2+beat)
	}
	t.Logf("the worker exited %s after the catalog stopped", took.Round(time.Millisecond))
}

// A worker declared lost by another process is refused its next renewal
// and exits 1 (the registry without a server).
func TestLostWorkerProcessIsFenced(t *testing.T) {
	e := pgEnv(t, testutil.StartPostgres(t))
	cat := openCatalog(t, e)
	w := startWorker(e, "kvm4")
	waitWorker(t, cat, "kvm4", "worker ready", func(w catalog.Worker) bool { return w.State == catalog.WorkerReady })
	if lost, err := cat.DeclareWorkersLost(context.Background(), time.Now().Add(time.Hour)); err != nil || len(lost) != 1 {
		t.Fatalf("declare lost: %+v %v", lost, err)
	}
	if err := awaitExit(t, w); err == nil || !strings.Contains(w.Log(), "declared lost") {
		t.Fatalf("the lost worker exited with %v:\n%s", err, w.Log())
	}
}

// A worker speaking a protocol the servers do not is refused at
// registration, with the reason, and leaves no row.
func TestVersionSkewIsRefused(t *testing.T) {
	e := pgEnv(t, testutil.StartPostgres(t))
	next := strconv.Itoa(fleet.Protocol + 1)
	out := e.Expect(8, append([]string{"worker", "--name", "kvm5", "--protocol", next}, e.WorkerLogin("kvm5")...)...)
	if !strings.Contains(out, "speaks fleet protocol "+next+", the servers speak "+strconv.Itoa(fleet.Protocol)) {
		t.Fatalf("refusal: %s", out)
	}
	if ws, err := openCatalog(t, e).ListWorkers(context.Background()); err != nil || len(ws) != 0 {
		t.Fatalf("a refused worker left a row: %+v %v", ws, err)
	}
}

// A name that cannot be a River queue's is refused before registration.
func TestBadNameIsRefused(t *testing.T) {
	e := clitest.NewEnv(t)
	if out := e.Expect(2, "worker", "--name", "KVM.1"); !strings.Contains(out, "is not a worker name") {
		t.Fatalf("refusal: %s", out)
	}
}

// A second process registering a name takes it over: the first is
// refused its next renewal and exits 1; SIGTERM then drains the second,
// which deregisters and exits 0.
func TestSecondRegistrationFencesTheFirst(t *testing.T) {
	e := pgEnv(t, testutil.StartPostgres(t))
	cat := openCatalog(t, e)
	first := startWorker(e, "kvm6")
	waitWorker(t, cat, "kvm6", "first ready", func(w catalog.Worker) bool { return w.State == catalog.WorkerReady && w.Epoch == 1 })
	second := startWorker(e, "kvm6")
	if err := awaitExit(t, first); err == nil || !strings.Contains(first.Log(), "registered again (epoch 2, this process holds 1)") {
		t.Fatalf("the first worker exited with %v:\n%s", err, first.Log())
	}
	waitWorker(t, cat, "kvm6", "second ready", func(w catalog.Worker) bool { return w.State == catalog.WorkerReady && w.Epoch == 2 })
	if err := second.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := awaitExit(t, second); err != nil {
		t.Fatalf("the second worker after SIGTERM: %v\n%s", err, second.Log())
	}
	waitWorker(t, cat, "kvm6", "deregistered", func(w catalog.Worker) bool { return w.Name == "" })
}
