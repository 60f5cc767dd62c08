package workercmd_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// heldConfig is one VM whose disk (8 to 16 MiB, all allocated) is read
// up to its 64th block (4 MiB), then held until the file %s exists:
// the test sees the unit part-way for as long as it needs.
const heldConfig = `
maintenance: {worker-dead-after: 2s}
connections:
  - {name: held, kind: fake, options: {seed: 5, vms: 1, hosts: 1, datastores: 1, disk-size: 16MiB, allocated: 1, hold-from-block: 64, hold-until: %q}}
policies:
  - {name: held, connections: [held], schedule: "0 3 1 1 *"}
`

// TestJobProgressCountsAUnitOnAWorkerLive: the job's progress (what the
// API, the console and `coffer run --server` show) counts the bytes of a
// VM backed up on a worker while it runs, as the in-process engine counts
// its own tasks', not only once the VM ends: with the unit held part-way
// on the worker, the job's done bytes grow above zero while the task is
// still running and no VM is done; once released, the run succeeds with
// every byte done.
func TestJobProgressCountsAUnitOnAWorkerLive(t *testing.T) {
	e := pgEnv(t, testutil.StartPostgres(t))
	release := filepath.Join(t.TempDir(), "release")
	e.Config(fmt.Sprintf(heldConfig, release))
	srv := e.StartServer()
	token := e.AdminToken()
	registered := func(s *clitest.ServerProc) bool { return strings.Contains(s.Stderr.String(), "worker registered") }
	w := e.StartCoffer(registered, patience, append([]string{"worker", "--name", "kvm1", "--slots", "1", "--reach-connections", "held",
		"--heartbeat", beat.String(), "--dead-after", dead.String(), "--log-level", "info"}, e.WorkerLogin("kvm1")...)...)
	waitLog(t, srv, "the engine given the worker", "the engine places units on the workers", "workers=kvm1")
	defer func() {
		if t.Failed() {
			t.Logf("server:\n%s\nkvm1:\n%s", srv.Log(), w.Log())
		}
	}()

	start := time.Now()
	done := make(chan api.Job, 1)
	go func() { done <- srv.RunPolicy(token, "held") }()
	defer func() { _ = os.WriteFile(release, nil, 0o600) }() // a failed test lets the unit end
	id := runningJob(t, srv, token, "held")
	var live api.TaskProgress
	deadline := time.Now().Add(patience)
	for live.DoneBytes == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the job's done bytes stayed 0 for %s while its VM was held part-way on kvm1", patience)
		}
		j := jobView(t, srv, token, id)
		// (The job's row comes before its task's, and the task's row may
		// still say queued: the engine records it running at its next
		// flush.)
		if j.Status != "running" || len(j.Tasks) > 1 || (len(j.Tasks) == 1 && j.Tasks[0].Status != "queued" && j.Tasks[0].Status != "running") {
			t.Fatalf("the held run is not running: %+v", j)
		}
		if j.Progress != nil {
			live = *j.Progress
		}
		time.Sleep(100 * time.Millisecond) // a poll's pace, not a synchronisation
	}
	t.Logf("the job's progress while its VM is held on kvm1 (%s after the run's start): %+v", time.Since(start).Round(time.Millisecond), live)
	if live.DoneBytes >= live.TotalBytes || live.ItemsDone != 0 || live.ItemsTotal != 1 {
		t.Fatalf("the job's progress with its one VM running part-way: %+v; want some bytes done of more, no VM done", live)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var j api.Job
	select {
	case j = <-done:
	case <-time.After(patience):
		t.Fatalf("the released run did not end within %s", patience)
	}
	end := jobView(t, srv, token, id)
	if j.Status != "success" || end.Progress == nil || end.Progress.DoneBytes != end.Progress.TotalBytes || end.Progress.ItemsDone != 1 {
		t.Fatalf("the released run: %+v, progress %+v", j, end.Progress)
	}
}
