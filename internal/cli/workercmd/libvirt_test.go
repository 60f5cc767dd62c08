package workercmd_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/hypervisor/libvirt/libvirttest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// libvirtConfig is one libvirt connection, lv, to the test's libvirtd,
// whose domains run on host kvm1 (the host option, as a worker's
// --reach-hosts names it): a libvirt connection is host-bound
// (engine.RouteOf), so its units run only on a worker that reaches host
// kvm1 of lv. Its state directory is the daemon's, where its QEMU (user
// nobody) reaches the NBD sockets. One attempt: a failure is the test's.
const libvirtConfig = `
maintenance: {worker-dead-after: %s}
connections:
  - {name: lv, kind: libvirt, options: {uri: %q, host: kvm1, state-dir: %q}}
policies:
  - {name: fleet, connections: [lv], schedule: "0 3 1 1 *", snapshot: crash-consistent, retries: {attempts: 1}}
`

// TestLibvirtDomainOnItsHostsWorker: a policy run through the server
// backs up a libvirt domain on the worker of its host, kvm1 (a network
// namespace of that name, reaching the daemon's Unix socket), and never
// on kvm2, which reaches the connection but not that host, though kvm2 is
// as idle. The second run is an incremental taken with the domain
// paused: its point restores to exactly the domain's disk (qemu-img
// compare). Afterwards libvirt holds nothing of coffer's beyond the
// chain's own checkpoints: no backup job, no other checkpoint or
// snapshot, no journal or socket (libvirttest.Leftovers).
func TestLibvirtDomainOnItsHostsWorker(t *testing.T) {
	testutil.RequireBinary(t, "qemu-img")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	lab := testutil.NewNetLab(t, "kvm1", "kvm2")
	e := pgEnv(t, testutil.StartPostgresOnLab(t, lab))
	g := clitest.StartLibvirtGuest(t, ctx)
	ready := g.Wait("COFFER READY", 0)
	admin, dom := libvirtAdmin(t, g.D.URI, "web-1")
	lvState := filepath.Join(g.D.Dir, "st")
	e.Config(fmt.Sprintf(libvirtConfig, steadyDead, g.D.URI, lvState))
	srv := e.StartServer()
	token := e.AdminToken()
	cat := openCatalog(t, e)
	kvm1 := startReachWorker(e, lab.Hosts()[0], "lv", "lv/kvm1", steadyDead)
	kvm2 := startReachWorker(e, lab.Hosts()[1], "lv", "lv/kvm2", steadyDead)
	waitLog(t, srv, "the engine given both workers", "the engine places units on the workers", "workers=kvm1,kvm2")
	if w := waitWorker(t, cat, "kvm1", "kvm1 ready", func(w catalog.Worker) bool { return w.State == catalog.WorkerReady }); w.Host != "kvm1" {
		t.Fatalf("kvm1 registered from host %q, not from its namespace", w.Host)
	}

	full := runOnWorker(t, srv, token, cat, "kvm1", "full")
	t.Logf("full on kvm1: %.1fs, %d bytes read", full.FinishedAt.Sub(full.StartedAt).Seconds(), full.BytesRead)
	g.Wait("COFFER WROTE", ready)
	g.Virsh("suspend", "web-1")
	inc := runOnWorker(t, srv, token, cat, "kvm1", "incremental")
	t.Logf("incremental on kvm1, domain paused: %.1fs, %d bytes read", inc.FinishedAt.Sub(inc.StartedAt).Seconds(), inc.BytesRead)
	if inc.BytesRead >= full.BytesRead {
		t.Errorf("the incremental read %d bytes, its full %d: the chain's checkpoint was not used on the worker", inc.BytesRead, full.BytesRead)
	}
	restored := filepath.Join(e.Dir, "restored.raw")
	e.Must("restore", inc.BackupPointID, "--to", restored)
	if out, err := exec.CommandContext(ctx, "qemu-img", "compare", "-U", "-f", "raw", "-F", "qcow2", restored, g.Disk).CombinedOutput(); err != nil {
		t.Fatalf("the incremental's point differs from the paused domain's disk: %v %s", err, out)
	}
	g.Virsh("resume", "web-1")

	left, err := libvirttest.Leftovers(admin, dom, lvState, "fleet@default")
	if err != nil || len(left) != 0 {
		t.Fatalf("left behind in libvirt after the worker's backups: %v %v", left, err)
	}
	if units := unitStarts(t, kvm1); len(units) != 2 || units[0].Host != "kvm1" || units[1].Host != "kvm1" {
		t.Errorf("kvm1 logged the units %+v, want web-1's two on host kvm1", units)
	}
	if units := unitStarts(t, kvm2); len(units) != 0 {
		t.Errorf("kvm2, which does not reach host kvm1, ran %+v", units)
	}
	if strings.Contains(srv.Log(), "VM unit starts") {
		t.Errorf("the server ran a unit itself:\n%s", srv.Log())
	}
}

// libvirtAdmin is the test's own connection to the daemon at uri, as an
// administrator's, and its domain called name.
func libvirtAdmin(t *testing.T, uri, name string) (*golibvirt.Libvirt, golibvirt.Domain) {
	t.Helper()
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := golibvirt.ConnectToURI(u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Disconnect() }) // the daemon stops after
	dom, err := admin.DomainLookupByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return admin, dom
}

// steadyDead is the dead interval of the tests that lose no worker: long
// enough that a worker slowed by a busy machine (TCG guests beside it) is
// not declared lost.
const steadyDead = 10 * time.Second

// startReachWorker starts `coffer worker` on host (named after it),
// reaching connections and hosts ("connection/host", or ""), with a state
// directory of its own, logging in JSON; deadAfter is its dead interval,
// a tenth of it its heartbeat.
func startReachWorker(e *clitest.Env, host *testutil.NetHost, connections, hosts string, deadAfter time.Duration) *clitest.ServerProc {
	e.T.Helper()
	login := e.WorkerLogin(host.Name) // made here, in the test's process
	e.Host = host
	e.Vars["COFFER_LOG_FORMAT"] = "json" // unitStarts reads its log
	defer func() { e.Host = nil; delete(e.Vars, "COFFER_LOG_FORMAT") }()
	registered := func(s *clitest.ServerProc) bool { return strings.Contains(s.Stderr.String(), "worker registered") }
	args := []string{"worker", "--name", host.Name, "--slots", "2", "--reach-connections", connections,
		"--state-dir", filepath.Join(e.Dir, host.Name+"-state"), "--heartbeat", (deadAfter / 10).String(), "--dead-after", deadAfter.String(),
		"--log-level", "info"}
	args = append(args, login...)
	if hosts != "" {
		args = append(args, "--reach-hosts", hosts)
	}
	w := e.StartCoffer(registered, patience, args...)
	e.T.Cleanup(func() {
		if e.T.Failed() {
			e.T.Logf("worker %s:\n%s", host.Name, w.Log())
		}
	})
	return w
}

// runOnWorker runs the policy fleet of one VM through the server and
// wants it to succeed with a backup of mode, its attempt run on worker
// (the worker's event in the task's log); it returns the task.
func runOnWorker(t *testing.T, srv *clitest.ServerProc, token string, cat catalog.Catalog, worker, mode string) catalog.Task {
	t.Helper()
	j := srv.RunPolicy(token, "fleet")
	if j.Status != "success" || j.TasksOK != 1 {
		t.Fatalf("run fleet: %+v\n%s", j, srv.Log())
	}
	tasks, err := cat.ListTasks(context.Background(), catalog.TaskFilter{JobID: j.ID})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("job %d's tasks: %+v %v", j.ID, tasks, err)
	}
	task := tasks[0]
	if ran := ranOn(t, cat, task); task.Mode != mode || task.BackupPointID == "" || ran != worker {
		t.Fatalf("%s: %s backup, point %q, ran on %q; want a %s backup on %s", task.VMName, task.Mode, task.BackupPointID, ran, mode, worker)
	}
	return task
}

// ranOn is the worker the task's last attempt ran on, as its log says.
func ranOn(t *testing.T, cat catalog.Catalog, task catalog.Task) string {
	t.Helper()
	evs, err := cat.ListEvents(context.Background(), catalog.EventFilter{JobID: task.JobID, TaskID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	ran := ""
	for _, ev := range evs {
		if ev.Kind == "worker" && strings.Contains(ev.Message, fmt.Sprintf("attempt %d runs", task.Attempts)) {
			ran, _ = ev.Fields["worker"].(string)
		}
	}
	return ran
}

// unitStarts are the units a worker process logged as started.
func unitStarts(t *testing.T, w *clitest.ServerProc) []unitLine {
	t.Helper()
	var out []unitLine
	sc := bufio.NewScanner(strings.NewReader(w.Log()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l unitLine
		if strings.Contains(sc.Text(), `"VM unit starts"`) && json.Unmarshal(sc.Bytes(), &l) == nil {
			out = append(out, l)
		}
	}
	return out
}
