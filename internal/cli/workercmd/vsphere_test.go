package workercmd_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/vmware/govmomi/vim25/mo"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
	"github.com/coffer-backup/coffer/internal/testutil/vclab"
)

// vsphereVMs is how many VMs the simulated vCenter holds for the fleet
// policy: more than the two workers' four slots, so that both take some.
const vsphereVMs = 8

// vsphereFleet are two policies over every VM of the connection vc:
// fleet, which any worker reaching vc may run, and pinned, whose workers
// (its affinity) are proxy2 alone. One attempt: a failure is the test's.
const vsphereFleet = `policies:
  - {name: fleet, connections: [vc], schedule: "0 3 1 1 *", retries: {attempts: 1}}
  - {name: pinned, connections: [vc], schedule: "0 3 1 1 *", workers: [proxy2], retries: {attempts: 1}}
`

// tlsClients records the address of every client that opens a TLS
// connection to the simulated vCenter.
type tlsClients struct {
	mu    sync.Mutex
	addrs []string
}

func (c *tlsClients) config() *tls.Config {
	return &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		host, _, _ := net.SplitHostPort(h.Conn.RemoteAddr().String())
		c.mu.Lock()
		defer c.mu.Unlock()
		c.addrs = append(c.addrs, host)
		return nil, nil // the server's own settings
	}}
}

// since are the clients' addresses from the n-th connection on.
func (c *tlsClients) since(n int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.addrs[n:])
}

func (c *tlsClients) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.addrs)
}

// TestVSphereOnAnyWorkerReachingIt: a simulated vCenter on the lab's
// network, reached by two workers on hosts of their own (proxy1 and
// proxy2, network namespaces). A vSphere VM is not bound to a host
// (engine.RouteOf): a policy run through the server spreads its VMs'
// units over both workers, and each point restores to exactly its VM's
// disk. The server never opens the vCenter connection
// (fleet.WorkerConnector): from its start on, every client of the
// vCenter is one of the workers, by its address, and no VM keeps a
// snapshot. A policy whose workers
// name proxy2 alone runs every unit there.
func TestVSphereOnAnyWorkerReachingIt(t *testing.T) {
	lab := testutil.NewNetLab(t, "proxy1", "proxy2")
	e := pgEnv(t, testutil.StartPostgresOnLab(t, lab))
	clients := &tlsClients{}
	vc := clitest.NewVCLab(t, vclab.StartOn(t, lab.Gateway, clients.config(), 2, 0))
	for i := 2; i <= vsphereVMs; i++ {
		vc.CreateVM(context.Background(), fmt.Sprintf("app-%02d", i))
	}
	want := map[string][]byte{} // each VM's disk
	for _, vm := range vc.VMs {
		data := make([]byte, vclab.DiskSize)
		_, _ = rand.Read(data[:vclab.DiskSize/2]) // the rest stays zero, as much of a real disk
		vc.WriteFlat(vc.Disk(vm.Name), data)
		want[vm.Name] = data
	}
	e.Config(fmt.Sprintf("maintenance: {worker-dead-after: %s}\n", steadyDead) + vc.Connections(e) + vsphereFleet)
	cat := openCatalog(t, e)
	workers := map[string]*clitest.ServerProc{}
	for _, h := range lab.Hosts() {
		workers[h.Name] = startReachWorker(e, h, "vc", "", steadyDead)
		waitWorker(t, cat, h.Name, h.Name+" ready", func(w catalog.Worker) bool { return w.State == catalog.WorkerReady })
	}

	// The server starts with both workers registered, as a restarted
	// server finds them: vc is theirs from its start.
	before := clients.count()
	srv := e.StartServer()
	token := e.AdminToken()
	waitLog(t, srv, "the engine given both workers", "the engine places units on the workers", "workers=proxy1,proxy2")
	j := srv.RunPolicy(token, "fleet")
	if j.Status != "success" || j.TasksOK != vsphereVMs {
		t.Fatalf("run fleet: %+v\n%s", j, srv.Log())
	}
	t.Logf("the run of %d VMs on two workers took %.1fs", vsphereVMs, j.DurationSeconds)

	tasks, err := cat.ListTasks(context.Background(), catalog.TaskFilter{JobID: j.ID})
	if err != nil || len(tasks) != vsphereVMs {
		t.Fatalf("job %d's tasks: %d %v", j.ID, len(tasks), err)
	}
	ran := map[string]int{}
	for _, task := range tasks {
		w := ranOn(t, cat, task)
		ran[w]++
		restored := filepath.Join(e.Dir, task.VMName+".raw")
		e.Must("restore", task.BackupPointID, "--to", restored)
		if got, err := os.ReadFile(restored); err != nil || !bytes.Equal(got, want[task.VMName]) {
			t.Errorf("%s's point (run on %s) differs from its disk: %v", task.VMName, w, err)
		}
	}
	logged := 0
	for name, w := range workers {
		units := unitStarts(t, w)
		logged += len(units)
		if len(units) != ran[name] || ran[name] == 0 {
			t.Errorf("%s logged %d units, ran %d of the job's (by the tasks' logs): %v", name, len(units), ran[name], ran)
		}
	}
	if logged != vsphereVMs {
		t.Errorf("the workers logged %d units for %d VMs: %v", logged, vsphereVMs, ran)
	}
	t.Logf("units per worker: %v", ran)
	checkPinned(t, srv, token, cat)

	addrs := map[string]bool{lab.Hosts()[0].Addr: true, lab.Hosts()[1].Addr: true}
	seen := clients.since(before)
	for _, a := range seen {
		if !addrs[a] {
			t.Fatalf("a client at %s, not a worker, connected to the vCenter after the server started: %v", a, seen)
		}
	}
	t.Logf("%d connections to the vCenter since the server started, all from the workers", len(seen))

	// Last, as the test's own client connects from the lab's gateway:
	// the workers left no snapshot on any VM.
	var vms []mo.VirtualMachine
	vc.Retrieve(context.Background(), "VirtualMachine", []string{"name", "snapshot"}, &vms)
	for _, vm := range vms {
		if vm.Snapshot != nil {
			t.Errorf("%s keeps snapshots after its backups on the workers: %+v", vm.Name, vm.Snapshot.RootSnapshotList)
		}
	}
}

// checkPinned runs the policy pinned, whose workers are proxy2 alone:
// every one of its units runs there, though proxy1 reaches vc as well.
func checkPinned(t *testing.T, srv *clitest.ServerProc, token string, cat catalog.Catalog) {
	t.Helper()
	j := srv.RunPolicy(token, "pinned")
	if j.Status != "success" || j.TasksOK != vsphereVMs {
		t.Fatalf("run pinned: %+v\n%s", j, srv.Log())
	}
	tasks, err := cat.ListTasks(context.Background(), catalog.TaskFilter{JobID: j.ID})
	if err != nil || len(tasks) != vsphereVMs {
		t.Fatalf("job %d's tasks: %d %v", j.ID, len(tasks), err)
	}
	for _, task := range tasks {
		if w := ranOn(t, cat, task); w != "proxy2" {
			t.Errorf("%s of the policy pinned to proxy2 ran on %q", task.VMName, w)
		}
	}
	t.Logf("the run pinned to proxy2 took %.1fs", j.DurationSeconds)
}
