package workercmd_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
)

// resumeConfig is leaderConfig without the schedule's runs (the only run
// is the one started through the API), under lossDead.
var resumeConfig = strings.NewReplacer(`schedule: "@every 2s"`, `schedule: "0 3 1 1 *"`,
	"worker-dead-after: 2s", "worker-dead-after: "+lossDead.String()).Replace(leaderConfig)

// TestRunResumedAfterItsLeaderDies: a policy run started through the
// leading server's API, with units running on the workers and units
// queued, loses its server (SIGKILL). The other server takes the
// schedules over, marks the run interrupted and resumes its remaining
// VMs as a new job for the same user, the two jobs naming each other;
// the dead server's units still running are held until they end. Every
// VM ends with exactly one current point, and no worker or VM was ever
// granted twice at once.
func TestRunResumedAfterItsLeaderDies(t *testing.T) { runResumedAfterItsLeaderIsLost(t, false) }

// TestRunResumedAfterItsLeaderStepsDown: the same with the leader frozen
// (SIGSTOP) past its lease and woken once the other server leads: alive,
// it would keep its run's queued units waiting for ever. It steps down,
// interrupts its run (its units still running are cut), and the new
// leader resumes it; the woken leader's late grants are refused.
func TestRunResumedAfterItsLeaderStepsDown(t *testing.T) { runResumedAfterItsLeaderIsLost(t, true) }

func runResumedAfterItsLeaderIsLost(t *testing.T, freeze bool) {
	f := startLeaderFleetWith(t, resumeConfig, func(e *clitest.Env, name, connection string) *clitest.ServerProc {
		return startLossWorker(e, name, "--reach-connections", connection)
	})
	token := f.e.AdminToken()
	since := time.Now()
	var run api.Job
	if code, _ := f.a.Call(token, "POST", "/policies/fleet/run", nil, &run); code >= 300 || run.ID == 0 {
		t.Fatalf("POST run through a: %d %+v\n%s", code, run, f.a.Log())
	}
	waitEvent(t, f.cat, since, "kvm1")
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
	if freeze {
		// Woken once b leads: b hands nothing off before a's run is
		// handed over.
		waitLog(t, f.b, "server b takes over", "admission resumes after the takeover")
		if err := f.a.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		waitLog(t, f.a, "the woken server hands its run over", "its policy runs are interrupted")
	}
	tk := f.takeover(t, lost)
	resumed := f.resumedAs(t, run.ID)
	f.waitJob(t, token, f.b, resumed.ID)
	ctx := context.Background()
	done, err := f.cat.GetJob(ctx, resumed.ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leader %s with a run's units queued: %s; the run resumed as job %d %s after it, which ended %s after it",
		what, tk.String(lost), resumed.ID, resumed.CreatedAt.Sub(lost).Round(time.Millisecond), done.FinishedAt.Sub(lost).Round(time.Millisecond))
	old, err := f.cat.GetJob(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if old.Status != catalog.StatusFailed || !strings.Contains(old.Error, "interrupted") || done.Status != catalog.StatusSuccess ||
		done.User != "admin" || done.Policy != "fleet" {
		t.Errorf("the lost leader's run: %s (%s); its resumption: %s of %s by %q (%s), want interrupted, then a success of fleet for admin",
			old.Status, old.Error, done.Status, done.Policy, done.User, done.Error)
	}
	f.onePointEach(t, run.ID, resumed.ID)
	_, _ = f.sweep(t, &tk)
	f.logStoredAgain(t, resumed.ID)
	if t.Failed() {
		t.Log(f.diagnosis(t))
	}
}

// resumedAs waits for the interrupted run id to be resumed, and returns
// the job that resumes it, which says so in its log.
func (f *leaderFleet) resumedAs(t *testing.T, id int64) catalog.Job {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(patience)
	for {
		evs, err := f.cat.ListEvents(ctx, catalog.EventFilter{JobID: id})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Kind != "resumed" {
				continue
			}
			var next int64
			if _, err := fmt.Sscanf(ev.Message, "resumed as job %d", &next); err != nil {
				t.Fatalf("job %d: %q", id, ev.Message)
			}
			j, err := f.cat.GetJob(ctx, next)
			if err != nil {
				t.Fatal(err)
			}
			says, err := f.cat.ListEvents(ctx, catalog.EventFilter{JobID: next})
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range says {
				if ev.Kind == "resumes" && strings.Contains(ev.Message, fmt.Sprintf("resumes job %d", id)) {
					return j
				}
			}
			t.Fatalf("job %d, which resumes job %d, does not say so: %+v", next, id, says)
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d was not resumed within %s:\n%s", id, patience, f.diagnosis(t))
		}
		time.Sleep(50 * time.Millisecond) // a poll's pace, not a synchronisation
	}
}

// onePointEach wants each of the six VMs to have exactly one point in the
// catalog, made by one of jobs (the run and its resumption: a task of the
// resumption may name the point its VM's unit of the run committed after
// the run was resumed).
func (f *leaderFleet) onePointEach(t *testing.T, jobs ...int64) {
	t.Helper()
	ctx := context.Background()
	byVM := map[string]map[string][]int64{} // VM → point → the jobs whose task names it
	for _, id := range jobs {
		tasks, err := f.cat.ListTasks(ctx, catalog.TaskFilter{JobID: id})
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			if task.Status == catalog.StatusSuccess && task.BackupPointID != "" {
				vm := task.Connection + "/" + task.VMID
				if byVM[vm] == nil {
					byVM[vm] = map[string][]int64{}
				}
				byVM[vm][task.BackupPointID] = append(byVM[vm][task.BackupPointID], id)
			}
		}
	}
	if len(byVM) != 6 {
		t.Errorf("%d VMs of 6 were backed up by the run and its resumption: %v", len(byVM), byVM)
	}
	for vm, by := range byVM {
		if len(by) != 1 {
			t.Errorf("%s was backed up %d times: %v", vm, len(by), by)
		}
		_, id, _ := strings.Cut(vm, "/")
		pts, err := f.cat.ListBackupPoints(ctx, catalog.BackupPointFilter{VMID: id})
		if err != nil {
			t.Fatal(err)
		}
		if len(pts) != 1 {
			t.Errorf("%s has %d current points, want 1", vm, len(pts))
		}
	}
	t.Logf("points by VM: %v", byVM)
}

// logStoredAgain logs what the resumed job stored for the VMs whose unit
// the dead leader had handed off (its point is in the repository, not in
// the catalog) and for the others.
func (f *leaderFleet) logStoredAgain(t *testing.T, resumed int64) {
	t.Helper()
	ranBefore := map[string]bool{}
	for _, g := range f.grants(t) {
		if g.unit.LeaderEpoch == f.epochOfA && g.ran && !g.fenced {
			ranBefore[g.unit.Connection+"/"+g.unit.VMID] = true
		}
	}
	tasks, err := f.cat.ListTasks(context.Background(), catalog.TaskFilter{JobID: resumed})
	if err != nil {
		t.Fatal(err)
	}
	var again, fresh, nAgain, nFresh int64
	for _, task := range tasks {
		if ranBefore[task.Connection+"/"+task.VMID] {
			again, nAgain = again+task.BytesStored, nAgain+1
		} else {
			fresh, nFresh = fresh+task.BytesStored, nFresh+1
		}
	}
	t.Logf("the resumed job stored %d bytes for the %d VMs the dead leader's units had backed up, %d bytes for the %d others",
		again, nAgain, fresh, nFresh)
}
