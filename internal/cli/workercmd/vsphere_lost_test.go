package workercmd_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/snapdesc"
	"github.com/coffer-backup/coffer/internal/testutil"
	"github.com/coffer-backup/coffer/internal/testutil/vclab"
)

// vsphereAB are two policies, one VM each, with no retry: a VM whose
// attempt died with its worker is not backed up again.
const vsphereAB = `policies:
  - {name: a, connection: vc, select: {names: [app-01]}, snapshot: MODE, schedule: "0 3 1 1 *", retries: {attempts: 1}}
  - {name: b, connection: vc, select: {names: [app-02]}, schedule: "0 3 1 1 *", retries: {attempts: 1}}
`

// callHold holds the first SDK call of a method made once it is armed
// (the test's own calls come before), until its client's connection
// ends (the call is then not run) or the test does.
type callHold struct {
	method  string
	armed   atomic.Bool
	mu      sync.Mutex
	held    string
	first   chan string
	release chan struct{}
}

func newCallHold(t *testing.T, method string) *callHold {
	h := &callHold{method: method, first: make(chan string, 1), release: make(chan struct{})}
	t.Cleanup(func() { close(h.release) })
	return h
}

func (h *callHold) beforeCall(r *http.Request, method string) bool {
	if method != h.method || !h.armed.Load() {
		return true
	}
	addr, _, _ := net.SplitHostPort(r.RemoteAddr)
	h.mu.Lock()
	if h.held == "" {
		h.held = addr
		h.first <- addr
	}
	hold := h.held == addr
	h.mu.Unlock()
	if !hold {
		return true
	}
	select {
	case <-r.Context().Done():
		return false // the worker is dead: its call never runs
	case <-h.release:
		return true
	}
}

// TestVSphereKilledWorkersSnapshotGoesWhenItIsLost: two workers reach a
// simulated vCenter. The one backing up VM app-01 (policy a, no retry)
// is SIGKILLed holding the VM's coffer snapshot, and stays dead; later
// backups touch app-02 only (policy b). Once the leader declares the
// killed worker lost, it hands the removal of its snapshots to the live
// worker, which removes app-01's snapshot without backing app-01 up
// again, and leaves the VM's power as it was. In suspend mode the worker
// is killed while app-01 is suspended (its power-on held): the live
// worker also powers app-01 back on, as the snapshot's description says
// coffer suspended it.
func TestVSphereKilledWorkersSnapshotGoesWhenItIsLost(t *testing.T) {
	for _, mode := range []string{"crash-consistent", "suspend"} {
		t.Run(mode, func(t *testing.T) { killedWorkersSnapshotGoes(t, mode) })
	}
}

func killedWorkersSnapshotGoes(t *testing.T, mode string) {
	lab := testutil.NewNetLab(t, "proxy1", "proxy2")
	e := pgEnv(t, testutil.StartPostgresOnLab(t, lab))
	hooks, first, arm := vclab.Hooks{}, (<-chan string)(nil), func() {}
	if mode == "suspend" {
		h := newCallHold(t, "PowerOnVM_Task")
		hooks.BeforeCall, first, arm = h.beforeCall, h.first, func() { h.armed.Store(true) }
	} else {
		h := newReadHold(t)
		hooks.BeforeRead, first = h.beforeRead, h.first
	}
	vc := clitest.NewVCLab(t, vclab.StartHooked(t, lab.Gateway, nil, 2, 0, hooks))
	vc.CreateVM(context.Background(), "app-02")
	wantPower := types.VirtualMachinePowerStatePoweredOff
	if mode == "suspend" {
		vc.Power(vc.VMs[0], true) // coffer suspends a running VM only
		wantPower = types.VirtualMachinePowerStatePoweredOn
	}
	arm()
	e.Config(fmt.Sprintf("maintenance: {worker-dead-after: %s}\n", dead) + vc.Connections(e) + strings.Replace(vsphereAB, "MODE", mode, 1))
	cat := openCatalog(t, e)
	workers, byAddr := map[string]*clitest.ServerProc{}, map[string]string{}
	for _, h := range lab.Hosts() {
		workers[h.Name] = startReachWorker(e, h, "vc", "", dead)
		byAddr[h.Addr] = h.Name
		waitWorker(t, cat, h.Name, h.Name+" ready", func(w catalog.Worker) bool { return w.State == catalog.WorkerReady })
	}
	srv := e.StartServer()
	token := e.AdminToken()
	waitLog(t, srv, "the engine given both workers", "the engine places units on the workers", "workers=proxy1,proxy2")

	done := make(chan api.Job, 1)
	go func() { done <- srv.RunPolicy(token, "a") }()
	var killed string
	select {
	case addr := <-first:
		killed = byAddr[addr]
	case <-time.After(patience):
		t.Fatalf("no worker backed app-01 up within %s\n%s", patience, srv.Log())
	}
	vmA := vmState(t, vc, "app-01")
	left := cofferSnapshots(t, vc)
	if killed == "" || len(left) != 1 || mode == "suspend" && vmA.Runtime.PowerState != types.VirtualMachinePowerStateSuspended {
		t.Fatalf("held %q with app-01 %s and coffer snapshots %v", killed, vmA.Runtime.PowerState, left)
	}
	if mode == "suspend" && !snapdesc.Suspended(vmA.Snapshot.RootSnapshotList[0].Description) {
		t.Fatalf("the snapshot of the suspended app-01 does not say so: %q", vmA.Snapshot.RootSnapshotList[0].Description)
	}
	if err := workers[killed].Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = awaitExit(t, workers[killed])
	killedAt := time.Now()
	t.Logf("killed %s holding %s of app-01 (%s)", killed, left[0], vmA.Runtime.PowerState)

	if j := awaitRun(t, srv, done); j.Status == "success" {
		t.Fatalf("the run of a, without retries, succeeded after its worker died: %+v", j)
	}
	if j := srv.RunPolicy(token, "b"); j.Status != "success" || j.TasksOK != 1 {
		t.Fatalf("run b: %+v\n%s", j, srv.Log())
	}
	clean := waitClean(t, vc, "app-01", wantPower)
	t.Logf("app-01 clean (no snapshot, %s) %s after the kill", wantPower, clean.Sub(killedAt).Round(time.Millisecond))
	for deadline := time.Now().Add(patience); !cleanedUp(srv.Log(), left[0]); {
		if time.Now().After(deadline) {
			t.Fatalf("the leader's log does not say the cleanup of %s removed %s:\n%s", killed, left[0], srv.Log())
		}
		time.Sleep(50 * time.Millisecond) // a poll's pace, not a synchronisation
	}
	backedUpOnce(t, cat, "app-01")
	noSnapshots(t, vc)
}

// backedUpOnce: the catalog holds one task of VM vm, of one attempt.
func backedUpOnce(t *testing.T, cat catalog.Catalog, vm string) {
	t.Helper()
	tasks, err := cat.ListTasks(context.Background(), catalog.TaskFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var of []catalog.Task
	for _, task := range tasks {
		if task.VMName == vm {
			of = append(of, task)
		}
	}
	if len(of) != 1 || of[0].Attempts != 1 {
		t.Errorf("%s was backed up again: its tasks %+v", vm, of)
	}
}

// vmState is a VM's runtime and snapshots.
func vmState(t *testing.T, vc *clitest.VCLab, name string) mo.VirtualMachine {
	t.Helper()
	var vms []mo.VirtualMachine
	vc.Retrieve(context.Background(), "VirtualMachine", []string{"name", "snapshot", "runtime"}, &vms)
	for _, vm := range vms {
		if vm.Name == name {
			return vm
		}
	}
	t.Fatalf("no VM %s", name)
	return mo.VirtualMachine{}
}

// waitClean waits, at most patience, for VM name to keep no snapshot and
// be in power state want, and returns when it was seen so.
func waitClean(t *testing.T, vc *clitest.VCLab, name string, want types.VirtualMachinePowerState) time.Time {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		vm := vmState(t, vc, name)
		if vm.Snapshot == nil && vm.Runtime.PowerState == want {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s within %s: %s, snapshots %+v", name, patience, vm.Runtime.PowerState, vm.Snapshot)
		}
		time.Sleep(50 * time.Millisecond) // a poll's pace, not a synchronisation
	}
}
