package servercmd_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// scheduledRun is one run of a schedule as the catalog records it.
type scheduledRun struct {
	job  int64
	slot string
	pid  int
	kind string
	user string
}

// scheduledRuns reads every scheduled run from the catalog: each task
// whose log names the slot of its schedule.
func scheduledRuns(t *testing.T, cat catalog.Catalog) []scheduledRun {
	t.Helper()
	ctx := context.Background()
	jobs, err := cat.ListJobs(ctx, catalog.JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []scheduledRun
	for _, j := range jobs {
		events, err := cat.JobLog(ctx, j.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range events {
			if slot, ok := ev.Fields["slot"].(string); ok {
				out = append(out, scheduledRun{job: j.ID, slot: j.Kind + "@" + slot, pid: j.Owner.PID, kind: j.Kind, user: j.User})
			}
		}
	}
	return out
}

// TestTwoServersTakeOver runs two `coffer server` processes on one
// PostgreSQL catalog, with a policy and a gc scheduled every second:
// every scheduled run happens exactly once across both, all of them on
// the server that holds the schedules; when that one is killed with
// SIGKILL, the other runs the next ones.
func TestTwoServersTakeOver(t *testing.T) {
	dsn := testutil.StartPostgres(t)
	e := clitest.NewEnv(t)
	e.Vars["COFFER_CATALOG"] = dsn
	e.Must("init")
	e.Config(`
connections:
  - name: lab
    kind: fake
    options: {seed: 7, vms: 2, hosts: 1, datastores: 1, disk-size: 64KiB}
policies:
  - {name: often, connection: lab, schedule: "@every 1s"}
maintenance:
  takeover-after: 3s
  repositories:
    - repository: default
      gc: {schedule: "@every 1s"}
`)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute) // only catches a hang
	defer cancel()
	cat, err := catalogopen.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	// Each serves the API on a port of its own (startServer).
	sa := e.StartServer()
	a, aDone := sa.Cmd, sa.Done
	aKilled := false
	// waitFor polls the catalog until cond holds on the runs so far.
	waitFor := func(what string, cond func([]scheduledRun) bool) []scheduledRun {
		t.Helper()
		for {
			runs := scheduledRuns(t, cat)
			if cond(runs) {
				return runs
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: not within the test's bound; runs so far: %+v", what, runs)
			case err := <-aDone:
				if !aKilled {
					t.Fatalf("server A exited on its own: %v", err)
				}
				aDone = nil // killed on purpose
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	count := func(pid int) func([]scheduledRun) int {
		return func(runs []scheduledRun) int {
			n := 0
			for _, r := range runs {
				if r.pid == pid {
					n++
				}
			}
			return n
		}
	}
	waitFor("server A runs the schedules", func(r []scheduledRun) bool { return count(a.Process.Pid)(r) >= 2 })
	sb := e.StartServer()
	b, bDone := sb.Cmd, sb.Done
	before := waitFor("more runs with both servers up", func(r []scheduledRun) bool { return count(a.Process.Pid)(r) >= 10 })
	if n := count(b.Process.Pid)(before); n != 0 {
		t.Fatalf("server B ran %d scheduled runs while A held the schedules", n)
	}
	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	aKilled = true
	after := waitFor("server B takes the schedules over", func(r []scheduledRun) bool {
		kinds := map[string]bool{}
		for _, x := range r {
			if x.pid == b.Process.Pid {
				kinds[x.kind] = true
			}
		}
		return count(b.Process.Pid)(r) >= 4 && kinds["backup-policy"] && kinds["gc"]
	})
	if err := b.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-bDone:
		if err != nil {
			t.Fatalf("server B after SIGTERM: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("server B did not stop")
	}
	runs := scheduledRuns(t, cat)
	if len(runs) < len(after) {
		t.Fatalf("runs disappeared: %d, then %d", len(after), len(runs))
	}
	// Exactly once: no slot of a schedule ran twice, on one server or
	// across both.
	seen := map[string]scheduledRun{}
	for _, r := range runs {
		if prev, dup := seen[r.slot]; dup {
			t.Fatalf("scheduled run %s happened twice: job %d (pid %d) and job %d (pid %d)", r.slot, prev.job, prev.pid, r.job, r.pid)
		}
		seen[r.slot] = r
		if r.pid != a.Process.Pid && r.pid != b.Process.Pid {
			t.Fatalf("run %s by unknown pid %d", r.slot, r.pid)
		}
		if r.user != "@schedule" {
			t.Fatalf("run %s started by %q, want @schedule", r.slot, r.user)
		}
	}
	// B took over after A: its first run comes after A's last.
	var lastA, firstB string
	for _, r := range runs {
		at := r.slot[len(r.kind)+1:]
		if r.pid == a.Process.Pid && at > lastA {
			lastA = at
		}
		if r.pid == b.Process.Pid && (firstB == "" || at < firstB) {
			firstB = at
		}
	}
	if firstB <= lastA {
		t.Fatalf("B ran slot %s before A's last, %s", firstB, lastA)
	}
	fmt.Fprintf(testWriter{t}, "%d scheduled runs, A: %d, B: %d\n", len(runs), count(a.Process.Pid)(runs), count(b.Process.Pid)(runs))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
