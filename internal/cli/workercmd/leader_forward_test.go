package workercmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// forwardedConfig is singleConfig's estate (each VM on its host's worker)
// whose snapshots take 6 s, under leaderConfig's takeover time (3 s): a
// leader killed just after it handed a unit off dies while the unit
// runs. No worker is lost in these tests: their dead interval is a loaded
// machine's (lossDead).
const forwardedConfig = `
maintenance: {worker-dead-after: 10s, takeover-after: 3s}
connections:
  - {name: kvm, kind: fake-kvm, options: {seed: %d, vms: %d, hosts: 2, datastores: 2, disk-size: 256KiB, snapshot-create: 6s}}
policies:
  - {name: kvm, connection: kvm, schedule: "0 3 1 1 *"}
`

// forwardedHeldConfig is the same estate whose VMs' reads wait for a gate
// file (hold-until): two backups fill a worker's two slots until the test
// opens the gate, after the leader is lost, so that a third waits in the
// leader's engine when it dies, and no slot frees (the lost leader then
// grants the third) before.
const forwardedHeldConfig = `
maintenance: {worker-dead-after: 10s, takeover-after: 3s}
connections:
  - {name: kvm, kind: fake-kvm, options: {seed: %d, vms: %d, hosts: 2, datastores: 2, disk-size: 256KiB, hold-until: %q}}
policies:
  - {name: kvm, connection: kvm, schedule: "0 3 1 1 *"}
`

// TestForwardedBackupOutlivesItsLeader: a VM's backup through server b,
// which does not lead, is forwarded to the leader a, where it waits for a
// slot of the VM's worker; a is killed. b takes the schedules over, its
// forwarder sees that the leader that took the backup was replaced, and
// the backup runs under b, answering the caller with its point, within
// a bounded wait (River would rescue the forwarded job only after an
// hour). The VM has one point in the catalog, made under b's epoch (a
// dies while the backup waits for a slot: a unit it had handed off
// would commit its point too); the worker never had more units than
// its slots, nor the VM two at once.
func TestForwardedBackupOutlivesItsLeader(t *testing.T) { forwardedBackupLosesItsLeader(t, false) }

// TestForwardedBackupOutlivesAFrozenLeader: the same with a frozen
// (SIGSTOP) until the backup answered through b, then woken: a steps
// down, its job of the backup ends without a point, whatever it grants
// late under its old epoch is refused, and the VM still has one point.
func TestForwardedBackupOutlivesAFrozenLeader(t *testing.T) { forwardedBackupLosesItsLeader(t, true) }

func forwardedBackupLosesItsLeader(t *testing.T, freeze bool) {
	dsn := testutil.StartPostgres(t)
	e := pgEnv(t, dsn)
	gate := filepath.Join(e.Dir, "reads-may-go")
	e.Config(fmt.Sprintf(forwardedHeldConfig, singleSeed, singleVMs, gate))
	f := startForwardFleet(t, e, dsn)
	lease, err := f.cat.GetLease(context.Background(), "schedules")
	if err != nil {
		t.Fatal(err)
	}
	f.epochOfA = lease.Epoch
	token := e.AdminToken()
	host, vms := busiestHost(t)
	if len(vms) < 3 {
		t.Fatalf("%s has %d VMs, the test needs 3", host, len(vms))
	}
	home := f.workers[0]
	if singleHome[host] == "kvm2" {
		home = f.workers[1]
	}

	// Two backups through a fill the slots of the worker of the VMs'
	// host; a's process dies (or freezes) with them.
	for _, vm := range vms[:2] {
		go backupVMOverAPI(f.a, token, vm.Name)
	}
	waitCount(t, home, "the worker runs two units", "VM unit starts", 2)
	last := vms[2]
	done := make(chan apiResult, 1)
	go func() { done <- backupVMOverAPI(f.b, token, last.Name) }()
	old := waitVMJob(t, f.cat, last)
	what, sig := "killed", syscall.SIGKILL
	if freeze {
		what, sig = "frozen", syscall.SIGSTOP
		t.Cleanup(func() { _ = f.a.Cmd.Process.Signal(syscall.SIGCONT) })
	}
	if err := f.a.Cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	lost := time.Now()
	if !freeze {
		_ = awaitExit(t, f.a)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil { // the two units read on and end
		t.Fatal(err)
	}

	var res apiResult
	select {
	case res = <-done:
	case <-time.After(2 * patience):
		t.Fatalf("the forwarded backup did not end within %s of the leader's loss:\n%s", 2*patience, f.diagnosis(t))
	}
	answered := time.Since(lost)
	var pt api.BackupPoint
	if res.code != http.StatusOK || json.Unmarshal(res.body, &pt) != nil || pt.ID == "" {
		t.Fatalf("the forwarded backup of %s: %d %s\n%s", last.Name, res.code, res.body, f.diagnosis(t))
	}
	tk := f.takeover(t, lost)
	t.Logf("leader %s with a forwarded backup waiting in it: %s; the backup answered %s after the %s",
		what, tk.String(lost), answered.Round(time.Millisecond), map[bool]string{false: "kill", true: "freeze"}[freeze])
	if !strings.Contains(f.b.Log(), "the leader that took a forwarded operation was replaced") {
		t.Errorf("b did not take the forwarded backup back from the lost leader:\n%s", f.b.Log())
	}
	if freeze {
		if err := f.a.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		waitLog(t, f.a, "the woken server steps down", "another server took the schedules over")
		waitEnded(t, f.cat, old.ID)
	}
	checkOnePointUnder(t, f, last, pt.ID, old.ID, tk.epoch, tk.leads)
}

// waitEnded waits for catalog job id to end.
func waitEnded(t *testing.T, cat catalog.Catalog, id int64) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		j, err := cat.GetJob(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if j.Status != catalog.StatusRunning && j.Status != catalog.StatusQueued {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d still %s after %s", id, j.Status, patience)
		}
		time.Sleep(50 * time.Millisecond) // a poll's pace, not a synchronisation
	}
}

// checkOnePointUnder wants vm to have one point in the catalog, point,
// made by a backup-vm job other than the lost leader's job old, whose
// unit ran once under epoch (the new leader's); no grant of the old
// leader's made after the takeover to have run; and no worker to have
// had more units than its slots, nor the VM two at once.
func checkOnePointUnder(t *testing.T, f *leaderFleet, vm hypervisor.VM, point string, old int64, epoch int64, took time.Time) {
	t.Helper()
	ctx := context.Background()
	pts, err := f.cat.ListBackupPoints(ctx, catalog.BackupPointFilter{VMID: vm.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 1 || pts[0].ID != point {
		t.Errorf("%s has %d points in the catalog, want one, %s: %+v", vm.Name, len(pts), point, pts)
	}
	dead, err := f.cat.GetJob(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	if dead.Status == catalog.StatusSuccess {
		t.Errorf("the lost leader's job %d of %s succeeded", old, vm.Name)
	}
	var ran []span
	underNew, underOld := 0, 0
	for _, g := range f.grants(t) {
		if g.ran && !g.fenced {
			end := g.ended
			if !g.finished {
				end = time.Now()
			}
			ran = append(ran, span{g.unit.Worker, g.unit.Connection + "/" + g.unit.VMID, g.created, end, fmt.Sprintf("grant %d", g.id)})
			if g.unit.LeaderEpoch == f.epochOfA && g.created.After(took) {
				t.Errorf("grant %d of the old leader, made at %s after the takeover at %s, ran", g.id, g.created, took)
			}
		}
		if g.unit.VMID != vm.ID || !g.ran || g.fenced {
			continue
		}
		switch g.unit.LeaderEpoch {
		case f.epochOfA:
			underOld++ // handed off before a died: the takeover held it
		case epoch:
			underNew++
		}
	}
	if underNew != 1 {
		t.Errorf("%s's units under the new leader's epoch %d that ran: %d, want 1", vm.Name, epoch, underNew)
	}
	t.Logf("%s's units that ran: %d under the lost leader's epoch, %d under the new one's", vm.Name, underOld, underNew)
	checkGrantPeaks(t, "grants", ran)
	t.Logf("%s: one point (%s), its lost leader's job %d %s (%s)", vm.Name, point, old, dead.Status, dead.Error)
}

// lossDead is the dead interval of the workers of the tests of a lost
// leader: none of their workers is meant to be lost, even on a loaded
// machine.
const lossDead = 10 * time.Second

// startLossWorker starts worker name with reach, under lossDead.
func startLossWorker(e *clitest.Env, name string, reach ...string) *clitest.ServerProc {
	e.T.Helper()
	registered := func(s *clitest.ServerProc) bool { return strings.Contains(s.Stderr.String(), "worker registered") }
	args := append([]string{"worker", "--name", name, "--slots", "2", "--heartbeat", time.Second.String(), "--dead-after", lossDead.String(),
		"--log-level", "info"}, reach...)
	return e.StartCoffer(registered, patience, append(args, e.WorkerLogin(name)...)...)
}

// busiestHost is the host of singleFleet's estate with the most VMs,
// and its VMs.
func busiestHost(t *testing.T) (host string, vms []hypervisor.VM) {
	t.Helper()
	all, err := singleFleet().Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byHost := map[string][]hypervisor.VM{}
	for _, vm := range all {
		byHost[vm.Host] = append(byHost[vm.Host], vm)
		if len(byHost[vm.Host]) > len(vms) {
			host, vms = vm.Host, byHost[vm.Host]
		}
	}
	return host, vms
}

// waitCount waits until p has logged want at least n times.
func waitCount(t *testing.T, p *clitest.ServerProc, what, want string, n int) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for strings.Count(p.Log(), want) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s:\n%s", what, patience, p.Log())
		}
		time.Sleep(50 * time.Millisecond) // a poll's pace, not a synchronisation
	}
}

// waitVMJob waits for a backup-vm job of vm to be recorded.
func waitVMJob(t *testing.T, cat catalog.Catalog, vm hypervisor.VM) catalog.Job {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		jobs, err := cat.ListJobs(context.Background(), catalog.JobFilter{Kind: catalog.KindBackupVM})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if j.VM == vm.Name {
				return j
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no backup-vm job of %s within %s", vm.Name, patience)
		}
		time.Sleep(20 * time.Millisecond) // a poll's pace, not a synchronisation
	}
}

// TestForwardedBackupHandedOffBeforeItsLeaderDies: a VM's backup through
// b is forwarded to the leader a, which hands its unit to the VM's
// worker; a is killed while the unit takes its snapshot. The unit runs
// on and commits its point; b's forwarder names a's job of the backup
// to the new leader (itself), whose job settles that job's task before
// its first attempt: the caller gets one point, the VM's only one in
// the catalog (the lost leader's unit's, taken over, or, had the
// settlement come first, the new job's, the old unit fenced).
func TestForwardedBackupHandedOffBeforeItsLeaderDies(t *testing.T) {
	dsn := testutil.StartPostgres(t)
	e := pgEnv(t, dsn)
	e.Config(fmt.Sprintf(forwardedConfig, singleSeed, singleVMs))
	f := startForwardFleet(t, e, dsn)
	vm := vmOnHost(t, "host-01")
	home := f.workers[0]

	done := make(chan apiResult, 1)
	go func() { done <- backupVMOverAPI(f.b, e.AdminToken(), vm.Name) }()
	waitLog(t, home, "the worker runs a's unit of the forwarded backup", "VM unit starts", vm.Name)
	old := waitVMJob(t, f.cat, vm)
	if err := f.a.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	lost := time.Now()
	_ = awaitExit(t, f.a)

	var res apiResult
	select {
	case res = <-done:
	case <-time.After(2 * patience):
		t.Fatalf("the forwarded backup did not end within %s of the leader's loss:\n%s", 2*patience, f.diagnosis(t))
	}
	var pt api.BackupPoint
	if res.code != http.StatusOK || json.Unmarshal(res.body, &pt) != nil || pt.ID == "" {
		t.Fatalf("the forwarded backup of %s: %d %s\n%s", vm.Name, res.code, res.body, f.diagnosis(t))
	}
	t.Logf("the backup answered %s after the kill", time.Since(lost).Round(time.Millisecond))
	if !strings.Contains(f.b.Log(), fmt.Sprintf("lost_job=%d", old.ID)) {
		t.Errorf("b's forwarder did not name the lost leader's job %d:\n%s", old.ID, f.b.Log())
	}
	ctx := context.Background()
	pts, err := f.cat.ListBackupPoints(ctx, catalog.BackupPointFilter{VMID: vm.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 1 || pts[0].ID != pt.ID {
		t.Errorf("%s has %d points in the catalog, want one, the answer's %s: %+v", vm.Name, len(pts), pt.ID, pts)
	}
	oldTasks, err := f.cat.ListTasks(ctx, catalog.TaskFilter{JobID: old.ID})
	if err != nil || len(oldTasks) != 1 {
		t.Fatalf("the lost leader's job %d: %d tasks (%v)", old.ID, len(oldTasks), err)
	}
	switch ot := oldTasks[0]; {
	case ot.Status == catalog.StatusSuccess && ot.BackupPointID == pt.ID:
		t.Logf("the lost leader's unit committed first: its point %s is the answer", pt.ID)
	case ot.Status == catalog.StatusCancelled && strings.Contains(ot.Error, "carries the run on"):
		t.Logf("the settlement came first: the lost leader's task was cancelled (%s), the new job backed %s up", ot.Error, vm.Name)
	default:
		t.Errorf("the lost leader's task of %s: %s (%s), point %q; want its point the answer's, or it cancelled", vm.Name, ot.Status, ot.Error, ot.BackupPointID)
	}
}

// startForwardFleet starts the forwarding tests' fleet on e's catalog:
// server a, which leads, server b, and a worker on each host.
func startForwardFleet(t *testing.T, e *clitest.Env, dsn string) *leaderFleet {
	t.Helper()
	f := &leaderFleet{e: e, dsn: dsn, cat: openCatalog(t, e)}
	e.Vars["COFFER_STATE_DIR"] = filepath.Join(e.Dir, "state-a")
	f.a = e.StartServer()
	waitLog(t, f.a, "server a leads", "this server runs the schedules")
	e.Vars["COFFER_STATE_DIR"] = filepath.Join(e.Dir, "state-b")
	f.b = e.StartServer()
	f.workers = []*clitest.ServerProc{startLossWorker(e, "kvm1", "--reach-connections", "kvm", "--reach-hosts", "kvm/host-01"),
		startLossWorker(e, "kvm2", "--reach-connections", "kvm", "--reach-hosts", "kvm/host-02")}
	waitLog(t, f.a, "a's engine given both workers", "workers=kvm1,kvm2")
	return f
}
