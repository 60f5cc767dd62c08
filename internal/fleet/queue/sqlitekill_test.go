package queue_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivertype"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
)

const envSQLite = "COFFER_QUEUE_TEST_SQLITE" // the catalog a SQLite worker process works

// TestSQLiteWorkerProcess works queue w-a of the catalog at envSQLite
// until killed (only when started by TestSQLiteKillLoop).
func TestSQLiteWorkerProcess(t *testing.T) {
	path := os.Getenv(envSQLite)
	if path == "" {
		t.Skip("run by TestSQLiteKillLoop as a worker process")
	}
	ctx := context.Background()
	cat, err := catalogopen.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	var errs atomic.Int64
	c := sqliteClient(t, openRiverSQLite(t, path), &sqliteWorker{cat: cat}, &errs)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	select {}
}

// TestSQLiteKillLoop: a SQLite worker process killed -9 at random
// moments, ten times, while it works jobs that write the catalog, leaves
// the file whole and both River and the catalog usable: every job runs at
// most once, a job the kill interrupted stays running (River's rescuer's
// to end), and the rest are worked by the next process.
func TestSQLiteKillLoop(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/catalog.db"
	cat, err := catalogopen.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	db := openRiverSQLite(t, path)
	submitter, err := river.NewClient(riversqlite.New(db), &river.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	const rounds, perRound = 10, 10
	for round := range rounds + 1 {
		for range perRound {
			if _, err := submitter.Insert(ctx, sqliteJob{Millis: rand.N(100)}, &river.InsertOpts{Queue: "w-a", MaxAttempts: 1}); err != nil {
				t.Fatal(err)
			}
		}
		p := startSQLiteWorker(t, path)
		if round == rounds {
			waitWorked(t, submitter, fmt.Sprintf("sqlite-%d", p.cmd.Process.Pid))
		} else {
			time.Sleep(rand.N(400 * time.Millisecond)) // the moment of the kill, not a synchronisation
		}
		p.kill()
	}

	var ok string
	if err := db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity_check: %s, %v", ok, err)
	}
	rows, err := submitter.JobList(ctx, river.NewJobListParams().First(10000))
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := cat.ListJobs(ctx, catalog.JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	wrote := map[string]int{}
	for _, j := range jobs {
		if strings.HasPrefix(j.Worker, "probe-") {
			wrote[j.Worker]++
		}
	}
	states := map[rivertype.JobState]int{}
	lostCompletions := 0
	for _, r := range rows.Jobs {
		states[r.State]++
		n := wrote[fmt.Sprintf("probe-%d", r.ID)]
		if r.State == rivertype.JobStateRunning && n == 1 {
			lostCompletions++
		}
		if n > 1 || (r.State == rivertype.JobStateCompleted && n != 1) {
			t.Errorf("job %d (%s) wrote the catalog %d times", r.ID, r.State, n)
		}
	}
	// A job left running had its work done (its catalog row written)
	// when only River's completion, which River batches and writes after
	// the work returns, was lost with the process: coffer's worker
	// completes its jobs itself, in a transaction (work.go).
	t.Logf("after %d kills: %d jobs %v; %d running jobs had done their work", rounds, len(rows.Jobs), states, lostCompletions)
	if len(rows.Jobs) != (rounds+1)*perRound || states[rivertype.JobStateAvailable] != 0 {
		t.Fatalf("jobs by state: %v", states)
	}
}

func startSQLiteWorker(t *testing.T, path string) *workerProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSQLiteWorkerProcess$", "-test.v")
	cmd.Env = append(os.Environ(), envSQLite+"="+path)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &workerProcess{cmd: cmd}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.lines = bufio.NewScanner(out)
	t.Cleanup(p.kill)
	p.expect(t, "ready")
	return p
}

// waitWorked waits until the worker process (River client ID) has worked
// every job left: it is another process, so this reads the file (River's
// SQLite driver has no notice a test could wait for).
func waitWorked(t *testing.T, c *river.Client[*sql.Tx], id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := c.JobList(context.Background(), river.NewJobListParams().States(rivertype.JobStateAvailable, rivertype.JobStateRunning))
		if err != nil {
			t.Fatal(err)
		}
		running := 0
		for _, j := range res.Jobs {
			if j.State == rivertype.JobStateAvailable || slices.Contains(j.AttemptedBy, id) {
				running++
			}
		}
		if running == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs still to work after 30 s", running)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
