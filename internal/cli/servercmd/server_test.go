package servercmd_test

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
)

// TestServerRunsSchedules runs `coffer server` as a real process with a
// policy scheduled every second, waits for it to record several jobs, and
// stops it with SIGTERM: it exits cleanly with no job left running.
func TestServerRunsSchedules(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	e.Config(`
connections:
  - name: lab
    kind: fake
    options: {seed: 7, vms: 3, hosts: 1, datastores: 1, disk-size: 128KiB}
policies:
  - name: often
    connection: lab
    schedule: "@every 1s"
    retention: {keep-last: 2}
`)
	server := e.Child("server", "--listen", "127.0.0.1:0", "--state-dir", e.Dir+"/state")
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- server.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		var jobs []api.Job
		if code, out, _ := e.Run("jobs", "--json"); code == 0 && json.Unmarshal([]byte(out), &jobs) == nil && countStatus(jobs, "success") >= 2 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("server exited early: %v", err)
		case <-ctx.Done():
			t.Fatal("the server recorded no two successful jobs in time")
		case <-tick.C:
		}
	}
	if err := server.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("server after SIGTERM: %v", err)
	}
	var jobs []api.Job
	if err := json.Unmarshal([]byte(e.Must("jobs", "--json")), &jobs); err != nil {
		t.Fatal(err)
	}
	if n := countStatus(jobs, "running") + countStatus(jobs, "queued"); n != 0 {
		t.Fatalf("%d jobs still running after the server stopped: %+v", n, jobs)
	}
	// Retention ran after the successful runs: at most 2 points per VM.
	var points []map[string]any
	if err := json.Unmarshal([]byte(e.Must("snapshots", "--json")), &points); err != nil || len(points) > 3*2+3 {
		t.Fatalf("snapshots after retention: %d %v", len(points), err)
	}
}

// countStatus is how many of jobs have that status.
func countStatus(jobs []api.Job, status string) int {
	n := 0
	for _, j := range jobs {
		if j.Status == status {
			n++
		}
	}
	return n
}
