package workercmd_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestRunsThroughAFollowerRunOnTheLeader: two servers share one catalog,
// a leads (the schedules lease), b does not. A policy run started through
// b's API, waited for (`coffer run --server`) or not (POST .../run), is
// forwarded to a: a's engine records the job and hands each VM to its
// worker under a's lease epoch, so every unit succeeds at its first
// attempt and no worker fences one; the job reads the same through both
// servers; a VM's backup through b gets a's answer. Once a stops, b leads and runs its API's runs itself, under
// its own epoch.
func TestRunsThroughAFollowerRunOnTheLeader(t *testing.T) {
	dsn := testutil.StartPostgres(t)
	e := pgEnv(t, dsn)
	e.Config(unitsConfig)
	cat := openCatalog(t, e)
	e.Vars["COFFER_STATE_DIR"] = filepath.Join(e.Dir, "state-a")
	a := e.StartServer()
	waitLog(t, a, "server a leads", "this server runs the schedules")
	e.Vars["COFFER_STATE_DIR"] = filepath.Join(e.Dir, "state-b")
	b := e.StartServer()
	workers := []*clitest.ServerProc{startUnitWorker(e, "kvm1", "east"), startUnitWorker(e, "kvm2", "west")}
	waitLog(t, a, "a's engine given both workers", "workers=kvm1,kvm2")
	token := e.AdminToken()
	lease, err := cat.GetLease(context.Background(), "schedules")
	if err != nil {
		t.Fatal(err)
	}
	f := &leaderFleet{e: e, dsn: dsn, cat: cat, a: a, b: b, workers: workers}

	// Waited for: the command line through b.
	started := time.Now()
	code, out, stderr := e.Remote(b, token, "run", "fleet", "--json")
	if code != 0 {
		t.Fatalf("coffer run --server b: exit %d: %s\n%s\nb:\n%s", code, out, stderr, b.Log())
	}
	waited := clitest.Decode[api.Job](t, out)
	t.Logf("a run waited for through the follower took %s", time.Since(started).Round(time.Millisecond))
	f.ranOn(t, token, waited.ID, a, lease.Epoch)

	// A VM's backup through b is a's answer, whatever it is (a refuses
	// it: the connection is the workers', docs/14-workers.md).
	vm := waited.Tasks[0]
	path := fmt.Sprintf("/repositories/default/backups/vm/%s/%s", vm.Connection, vm.VM)
	var fromA, fromB struct{ Class, Detail string }
	codeA, _ := a.Call(token, "POST", path, map[string]any{}, &fromA)
	codeB, _ := b.Call(token, "POST", path, map[string]any{}, &fromB)
	t.Logf("backup-vm through a: %d %s %s; through b: %d %s %s", codeA, fromA.Class, fromA.Detail, codeB, fromB.Class, fromB.Detail)
	if codeA != codeB || fromA.Class != fromB.Class {
		t.Errorf("backup-vm through b answered %d %s, through a %d %s", codeB, fromB.Class, codeA, fromA.Class)
	}

	// Not waited for: the API answers with the job as it starts.
	var j api.Job
	if code, _ := b.Call(token, "POST", "/policies/fleet/run", nil, &j); code >= 300 || j.ID == 0 {
		t.Fatalf("POST run through b: %d %+v\n%s", code, j, b.Log())
	}
	if j.ID == waited.ID || j.User != "admin" {
		t.Fatalf("the run not waited for is job %d of %q, want a new job of admin", j.ID, j.User)
	}
	f.waitJob(t, token, b, j.ID)
	f.ranOn(t, token, j.ID, a, lease.Epoch)
	if n := strings.Count(b.Log(), "forwarded to the server holding the schedules lease"); n != 3 {
		t.Errorf("b forwarded %d operations to the leader, want 3 (two runs, a VM's backup):\n%s", n, b.Log())
	}
	if strings.Contains(a.Log(), "forwarded to the server") {
		t.Errorf("the leader forwarded its own runs:\n%s", a.Log())
	}

	// b leads once a stops, and runs its runs itself.
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	waitLog(t, b, "b takes over with the workers", "this server runs the schedules", "workers=kvm1,kvm2")
	lease, err = cat.GetLease(context.Background(), "schedules")
	if err != nil {
		t.Fatal(err)
	}
	code, out, stderr = e.Remote(b, token, "run", "fleet", "--json")
	if code != 0 {
		t.Fatalf("coffer run --server b once it leads: exit %d: %s\n%s\nb:\n%s", code, out, stderr, b.Log())
	}
	f.ranOn(t, token, clitest.Decode[api.Job](t, out).ID, b, lease.Epoch)
	if n := strings.Count(b.Log(), "forwarded to the server holding the schedules lease"); n != 3 {
		t.Errorf("b forwarded its own run once it led (%d forwards in all)", n)
	}
}

// waitJob waits, through srv's API, for job id to end.
func (f *leaderFleet) waitJob(t *testing.T, token string, srv *clitest.ServerProc, id int64) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		var j api.Job
		if code, _ := srv.Call(token, "GET", fmt.Sprintf("/jobs/%d", id), nil, &j); code != 200 {
			t.Fatalf("GET job %d: %d", id, code)
		}
		if j.Status != "running" && j.Status != "queued" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d still %s after %s", id, j.Status, patience)
		}
		time.Sleep(100 * time.Millisecond) // a poll's pace, not a synchronisation
	}
}

// ranOn checks that job id was run by the server leader (its process
// recorded it), that each of its six VMs was granted to a worker under
// leader's lease epoch and backed up at its first attempt, that no
// worker fenced anything, and that both servers show the job alike.
func (f *leaderFleet) ranOn(t *testing.T, token string, id int64, leader *clitest.ServerProc, epoch int64) {
	t.Helper()
	var seen []api.Job
	for _, srv := range []*clitest.ServerProc{f.a, f.b} {
		if srv.Cmd.ProcessState != nil {
			continue // stopped
		}
		var j api.Job
		if code, _ := srv.Call(token, "GET", fmt.Sprintf("/jobs/%d", id), nil, &j); code != 200 {
			t.Fatalf("GET job %d: %d", id, code)
		}
		seen = append(seen, j)
	}
	j := seen[0]
	for _, other := range seen[1:] {
		if other.Status != j.Status || other.OwnerPID != j.OwnerPID || len(other.Tasks) != len(j.Tasks) {
			t.Errorf("the servers show job %d differently: %s/%d/%d tasks and %s/%d/%d tasks", id,
				j.Status, j.OwnerPID, len(j.Tasks), other.Status, other.OwnerPID, len(other.Tasks))
		}
	}
	if j.Status != "success" || j.OwnerPID != leader.Cmd.Process.Pid || j.User != "admin" {
		t.Fatalf("job %d: %s (%s), run by pid %d for %q, want success, by the leader (pid %d) for admin", id, j.Status, j.Error,
			j.OwnerPID, j.User, leader.Cmd.Process.Pid)
	}
	if len(j.Tasks) != 6 {
		t.Fatalf("job %d has %d tasks, want 6", id, len(j.Tasks))
	}
	for _, task := range j.Tasks {
		if task.Status != "success" || task.Attempts != 1 {
			t.Errorf("job %d: %s/%s %s after %d attempts, want success at the first", id, task.Connection, task.VM, task.Status, task.Attempts)
		}
	}
	granted := 0
	for _, g := range f.grants(t) {
		if g.unit.Job != id {
			continue
		}
		granted++
		if g.unit.LeaderEpoch != epoch || g.fenced || g.unit.Worker != home[g.unit.Connection] {
			t.Errorf("job %d's unit %s/%s went to %s under leader epoch %d (fenced %v), want %s under %d", id, g.unit.Connection,
				g.unit.VMID, g.unit.Worker, g.unit.LeaderEpoch, g.fenced, home[g.unit.Connection], epoch)
		}
	}
	if granted != 6 {
		t.Errorf("job %d handed %d units to the workers, want 6", id, granted)
	}
	for _, w := range f.workers {
		if strings.Contains(w.Log(), "fenced") {
			t.Errorf("a worker fenced a unit:\n%s", w.Log())
		}
	}
}
