package catalogopen_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/catalog/catalogtest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

const (
	envLocation = "COFFER_TEST_CATALOG_LOCATION"
	envJobs     = "COFFER_TEST_CATALOG_JOBS" // 0: until killed
	envName     = "COFFER_TEST_CATALOG_WORKER"
)

const tasksPerJob = 5

// TestHelperCatalogWorker is the worker process of the tests below: it
// opens the catalog (migrating it if it is new) and writes jobs.
func TestHelperCatalogWorker(t *testing.T) {
	loc := os.Getenv(envLocation)
	if loc == "" {
		t.Skip("worker process of TestSeveralProcesses*")
	}
	jobs, _ := strconv.Atoi(os.Getenv(envJobs))
	ctx := context.Background()
	c, err := catalogopen.Open(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; jobs == 0 || i < jobs; i++ {
		if _, err := catalogtest.SimulateJob(ctx, c, fmt.Sprintf("%s-%d", os.Getenv(envName), i), tasksPerJob); err != nil {
			t.Fatal(err)
		}
	}
}

func startWorker(t *testing.T, loc, name string, jobs int) (*exec.Cmd, <-chan error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCatalogWorker$", "-test.count=1")
	cmd.Env = append(os.Environ(), envLocation+"="+loc, envName+"="+name, envJobs+"="+strconv.Itoa(jobs))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		if err != nil {
			err = fmt.Errorf("worker %s: %w\n%s", name, err, out.String())
		}
		done <- err
	}()
	return cmd, done
}

// locations are the databases the process tests run against: a fresh
// SQLite file and, where PostgreSQL is installed, a fresh database.
func locations(t *testing.T) map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"sqlite": func(t *testing.T) string { return filepath.Join(t.TempDir(), "catalog.db") },
		"postgres": func(t *testing.T) string {
			server := testutil.StartPostgres(t)
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, server)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			if _, err := conn.Exec(ctx, "CREATE DATABASE procs"); err != nil {
				t.Fatal(err)
			}
			return strings.Replace(server, "/postgres?", "/procs?", 1)
		},
	}
}

// Several processes open a new catalog at once (racing to migrate it) and
// write jobs concurrently: nothing is lost or duplicated.
func TestSeveralProcesses(t *testing.T) {
	const workers, jobs = 3, 8
	for name, newLocation := range locations(t) {
		t.Run(name, func(t *testing.T) {
			loc := newLocation(t)
			var waits []<-chan error
			for w := range workers {
				_, done := startWorker(t, loc, fmt.Sprintf("w%d", w), jobs)
				waits = append(waits, done)
			}
			for _, done := range waits {
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			c, err := catalogopen.Open(context.Background(), loc)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			checkConsistent(t, c, workers*jobs)
		})
	}
}

// checkConsistent verifies what SimulateJob wrote: every job has all of
// its tasks or none (CreateTasks is one transaction), every finished job
// has its points, and IDs are unique. wantDone < 0 accepts any count.
func checkConsistent(t *testing.T, c catalog.Catalog, wantDone int) {
	t.Helper()
	ctx := context.Background()
	jobs, err := c.ListJobs(ctx, catalog.JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	done := 0
	for _, j := range jobs {
		tasks, err := c.ListTasks(ctx, catalog.TaskFilter{JobID: j.ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) != 0 && len(tasks) != tasksPerJob {
			t.Fatalf("job %d (%s) has %d tasks: a batch was half written", j.ID, j.Policy, len(tasks))
		}
		if j.Status == catalog.StatusSuccess {
			done++
			if len(tasks) != tasksPerJob || j.TasksOK != tasksPerJob {
				t.Fatalf("finished job %+v has %d tasks", j, len(tasks))
			}
		}
	}
	if wantDone >= 0 && done != wantDone {
		t.Fatalf("%d finished jobs, want %d (of %d)", done, wantDone, len(jobs))
	}
	points, err := c.ListBackupPoints(ctx, catalog.BackupPointFilter{Repository: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	if len(points) < done*tasksPerJob {
		t.Fatalf("%d points for %d finished jobs", len(points), done)
	}
}

// Writers killed with SIGKILL in the middle of their work leave a
// consistent catalog that the next process opens and continues.
func TestKilledWriters(t *testing.T) {
	for name, newLocation := range locations(t) {
		t.Run(name, func(t *testing.T) {
			loc := newLocation(t)
			ctx := context.Background()
			c, err := catalogopen.Open(ctx, loc)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var cmds []*exec.Cmd
			var waits []<-chan error
			for w := range 2 {
				cmd, done := startWorker(t, loc, fmt.Sprintf("k%d", w), 0)
				cmds, waits = append(cmds, cmd), append(waits, done)
			}
			// Let them get going, then kill them wherever they are.
			deadline := time.Now().Add(time.Minute)
			for {
				jobs, err := c.ListJobs(ctx, catalog.JobFilter{Status: catalog.StatusSuccess, Limit: 20})
				if err != nil {
					t.Fatal(err)
				}
				if len(jobs) >= 20 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("workers wrote only %d jobs in a minute", len(jobs))
				}
				time.Sleep(5 * time.Millisecond) // polling interval
			}
			for i, cmd := range cmds {
				_ = cmd.Process.Kill()
				<-waits[i]
			}
			checkConsistent(t, c, -1)
			if name == "sqlite" {
				integrityCheck(t, loc)
			}
			// The next process carries on.
			_, done := startWorker(t, loc, "after", 3)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			checkConsistent(t, c, -1)
		})
	}
}

func integrityCheck(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&res); err != nil || res != "ok" {
		t.Fatalf("integrity_check: %q %v", res, err)
	}
	var fk int
	if err := db.QueryRow("SELECT count(*) FROM pragma_foreign_key_check").Scan(&fk); err != nil || fk != 0 {
		t.Fatalf("foreign_key_check: %d violations, %v", fk, err)
	}
}
