package workercmd_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
	"github.com/coffer-backup/coffer/internal/testutil/vclab"
)

// TestLostWorkersCleanupOutlivesItsLeader: the only worker reaching a
// simulated vCenter is SIGKILLed holding VM app-01's coffer snapshot
// (policy a, no retry). The leader a declares it lost, and its cleanup
// waits for a live worker reaching the vCenter: there is none. a is
// killed too. Server b takes the schedules over, and once a second
// worker reaching the vCenter is ready, b has it remove the lost
// worker's snapshot: the cleanup is driven from the registry's state
// (a registration lost), not from the declaration a made.
func TestLostWorkersCleanupOutlivesItsLeader(t *testing.T) {
	lab := testutil.NewNetLab(t, "proxy1", "proxy2")
	e := pgEnv(t, testutil.StartPostgresOnLab(t, lab))
	hold := newReadHold(t)
	vc := clitest.NewVCLab(t, vclab.StartHooked(t, lab.Gateway, nil, 2, 0, vclab.Hooks{BeforeRead: hold.beforeRead}))
	e.Config(fmt.Sprintf("maintenance: {worker-dead-after: %s, takeover-after: 3s}\n", dead) + vc.Connections(e) +
		strings.Replace(vsphereAB, "MODE", "crash-consistent", 1))
	e.Vars["COFFER_STATE_DIR"] = filepath.Join(e.Dir, "state-a")
	a := e.StartServer()
	waitLog(t, a, "server a leads", "this server runs the schedules")
	e.Vars["COFFER_STATE_DIR"] = filepath.Join(e.Dir, "state-b")
	b := e.StartServer()
	hosts := lab.Hosts()
	proxy1 := startReachWorker(e, hosts[0], "vc", "", dead)
	waitLog(t, a, "a's engine given proxy1", "workers=proxy1")

	token := e.AdminToken()
	done := make(chan api.Job, 1)
	go func() { done <- a.RunPolicy(token, "a") }()
	select {
	case <-hold.first:
	case <-time.After(patience):
		t.Fatalf("proxy1 did not back app-01 up within %s\n%s", patience, a.Log())
	}
	left := cofferSnapshots(t, vc)
	if len(left) != 1 {
		t.Fatalf("coffer snapshots %v while proxy1 reads app-01, want one", left)
	}
	if err := proxy1.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = awaitExit(t, proxy1)
	if j := awaitRun(t, a, done); j.Status == "success" {
		t.Fatalf("the run of a, without retries, succeeded after its worker died: %+v", j)
	}
	waitLog(t, a, "a declares proxy1 lost", "worker lost: no heartbeat")
	if cleanedUp(a.Log(), left[0]) {
		t.Fatalf("a cleaned up after proxy1 without a live worker:\n%s", a.Log())
	}
	if err := a.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = awaitExit(t, a)
	waitLog(t, b, "b takes over", "this server runs the schedules")
	startReachWorker(e, hosts[1], "vc", "", dead)
	ready := time.Now()
	clean := waitClean(t, vc, "app-01", types.VirtualMachinePowerStatePoweredOff)
	t.Logf("app-01's snapshot %s, left by proxy1 (lost under the dead leader a), removed %s after proxy2 registered",
		left[0], clean.Sub(ready).Round(time.Millisecond))
	for deadline := time.Now().Add(patience); !cleanedUp(b.Log(), left[0]); {
		if time.Now().After(deadline) {
			t.Fatalf("b's log does not say the cleanup of proxy1 removed %s:\n%s", left[0], b.Log())
		}
		time.Sleep(50 * time.Millisecond) // a poll's pace, not a synchronisation
	}
	noSnapshots(t, vc)
}
