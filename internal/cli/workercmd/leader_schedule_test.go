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
	"github.com/coffer-backup/coffer/internal/testutil"
)

// hourlyConfig is resumeConfig with the policy run every hour, on the
// clock the test drives.
var hourlyConfig = strings.Replace(resumeConfig, `schedule: "0 3 1 1 *"`, `schedule: "0 * * * *"`, 1)

// TestScheduledRunResumedAfterItsLeaderDies: the servers' schedules
// follow a clock the test drives (COFFER_TEST_CLOCK), set years back so
// that no job stamped by it falls in a window of real time. Server a runs
// the 11:00 slot of an hourly policy on the workers and is killed
// (SIGKILL) once its units fill the workers' slots, 2 more queued; the clock moves to 13:30, so
// the slots of 12:00 and 13:00 come while no server leads. Server b takes
// the schedules over, resumes the interrupted run as a new job (the run
// is not lost), records the two missed slots as one skipped run naming
// both jobs, and skips its 14:00 slot while the resumed run goes (no
// second run of the policy beside it). Every VM ends with exactly one
// current point, and no worker or VM was ever granted twice at once.
func TestScheduledRunResumedAfterItsLeaderDies(t *testing.T) {
	day := time.Date(2020, 1, 6, 0, 0, 0, 0, time.UTC)
	at := func(h, m int) time.Time { return day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute) }
	var clock *testutil.FileClock
	f := startLeaderFleetOn(t, hourlyConfig, func(e *clitest.Env, name, connection string) *clitest.ServerProc {
		return startLossWorker(e, name, "--reach-connections", connection)
	}, func(e *clitest.Env) {
		clock = testutil.NewFileClock(t, e.Dir, at(10, 59))
		e.Vars["COFFER_TEST_CLOCK"] = clock.Path
	})
	token := f.e.AdminToken()
	untilTrue(t, f, "a's schedules wait for 11:00", func() bool { return clock.WaitedFor(t, at(11, 0)) })
	since := time.Now() // real time: the units' events are stamped by it
	clock.Set(t, at(11, 0))
	run := waitEvent(t, f.cat, since, "kvm1").JobID
	// Every slot of both workers taken (2 VMs queued), as the sweep wants
	// grants of both leaders.
	untilTrue(t, f, "a's units fill the workers' slots", func() bool {
		n := 0
		for _, g := range f.grants(t) {
			if g.unit.LeaderEpoch == f.epochOfA && g.ran {
				n++
			}
		}
		return n >= 2*workerSlots
	})
	// Killed, then the clock moved past two slots before b can take the
	// lease (at least two thirds of takeover-after after a's last renewal).
	if err := f.a.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	clock.Set(t, at(13, 30))
	_ = awaitExit(t, f.a)
	tk := f.takeover(t, killed)
	resumed := f.resumedAs(t, run)
	missed := f.skippedAt(t, at(13, 0))
	want := fmt.Sprintf("skipped: 2 scheduled run(s) of policy fleet, from %s to %s, came while no server ran the schedules; "+
		"the run of job %d, interrupted with its server, goes on as job %d",
		at(12, 0).Format(time.RFC3339), at(13, 0).Format(time.RFC3339), run, resumed.ID)
	if missed.Error != want {
		t.Errorf("the missed slots' record says %q, want %q", missed.Error, want)
	}
	untilTrue(t, f, "b's schedules wait for 14:00", func() bool { return clock.WaitedFor(t, at(14, 0)) })
	if j, err := f.cat.GetJob(context.Background(), resumed.ID); err != nil || j.Status != catalog.StatusRunning {
		t.Fatalf("the resumed run (job %d) is %s at 14:00 (%v): the slot must come while it goes", resumed.ID, j.Status, err)
	}
	clock.Set(t, at(14, 0))
	overlap := f.skippedAt(t, at(14, 0))
	if want := fmt.Sprintf("skipped: the previous run of policy fleet (job %d) is still running", resumed.ID); overlap.Error != want {
		t.Errorf("the 14:00 slot's record says %q, want %q", overlap.Error, want)
	}
	f.waitJob(t, token, f.b, resumed.ID)
	done, err := f.cat.GetJob(context.Background(), resumed.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != catalog.StatusSuccess || done.User != "@schedule" || done.Policy != "fleet" {
		t.Errorf("the resumed run: %s of %s by %q (%s), want a success of fleet by the schedules", done.Status, done.Policy, done.User, done.Error)
	}
	// The job list shows both skipped runs, as `coffer jobs` does.
	var listed []api.Job
	if code, _ := f.b.Call(token, "GET", "/jobs?policy=fleet&status=cancelled", nil, &listed); code != 200 {
		t.Fatalf("GET /jobs: %d", code)
	}
	if len(listed) != 2 {
		t.Errorf("the job list shows %d cancelled runs of fleet, want the 2 skipped: %+v", len(listed), listed)
	}
	t.Logf("leader killed during its scheduled run (job %d): %s; resumed as job %d %s after the kill, which ended %s after it; "+
		"missed slots recorded as job %d, the overlapping slot as job %d",
		run, tk.String(killed), resumed.ID, resumed.CreatedAt.Sub(killed).Round(time.Millisecond),
		done.FinishedAt.Sub(killed).Round(time.Millisecond), missed.ID, overlap.ID)
	f.onePointEach(t, run, resumed.ID)
	_, _ = f.sweep(t, &tk)
	if t.Failed() {
		t.Log(f.diagnosis(t))
	}
}

// skippedAt waits for the skipped run of policy fleet recorded at slot
// (a cancelled job stamped with the slot, on the test's clock, with a
// "skipped" event), and returns it.
func (f *leaderFleet) skippedAt(t *testing.T, slot time.Time) catalog.Job {
	t.Helper()
	var found catalog.Job
	untilTrue(t, f, "a skipped run at "+slot.Format(time.RFC3339), func() bool {
		jobs, err := f.cat.ListJobs(context.Background(), catalog.JobFilter{Kind: catalog.KindBackupPolicy, Policy: "fleet",
			Status: catalog.StatusCancelled})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if !j.CreatedAt.Equal(slot) {
				continue
			}
			evs, err := f.cat.ListEvents(context.Background(), catalog.EventFilter{JobID: j.ID})
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				if ev.Kind == "skipped" {
					found = j
					return true
				}
			}
		}
		return false
	})
	return found
}

// untilTrue polls cond until it holds, failing after patience.
func untilTrue(t *testing.T, f *leaderFleet, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s\n%s", what, patience, f.diagnosis(t))
		}
		time.Sleep(20 * time.Millisecond) // a poll's pace, not a synchronisation
	}
}
