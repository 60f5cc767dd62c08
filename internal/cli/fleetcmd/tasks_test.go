package fleetcmd_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/job"
)

func localUserName(t *testing.T) string {
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return u.Username
}

// TestOperationsAreTasks runs a restore, a verify and a gc from the
// command line: each leaves a job in the catalog with its kind, the
// repository it acted on, the user who ran it and a log.
func TestOperationsAreTasks(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	img := e.Image("a.img", 4<<20, 2)
	e.Must("backup", "disk", img, "--name", "a")
	e.Must("backup", "disk", img, "--name", "a")
	e.Must("restore", "latest", "--to", filepath.Join(e.Dir, "out.raw"))
	e.Must("verify", "--read-data")
	e.Must("forget", "--keep-last", "1")
	e.Must("gc")
	user := localUserName(t)
	for _, kind := range []string{"backup-disk", "restore", "verify", "forget", "gc"} {
		j := e.JobOf(kind)
		if j.Status != "success" || j.Object != "/repositories/default" || j.User != user {
			t.Errorf("%s job: status %s, object %q, user %q; want success, /repositories/default, %q", kind, j.Status, j.Object, j.User, user)
		}
		if kind == "verify" && (j.Progress == nil || j.Progress.ItemsTotal == 0 || j.Progress.ItemsDone != j.Progress.ItemsTotal) {
			t.Errorf("verify job's progress: %+v, want every pack done", j.Progress)
		}
	}
	// A failing operation is recorded failed with its error in the log's end.
	e.Expect(command.ExitNoRepo, "restore", "ffffffff", "--to", filepath.Join(e.Dir, "none.raw"))
	if j := e.JobOf("restore"); j.Status != "failed" || !strings.Contains(j.Error, "ffffffff") {
		t.Errorf("failed restore recorded as %s (%q)", j.Status, j.Error)
	}
	// The log of forget says what it removed.
	if j := e.JobOf("forget"); !clitest.LogHas(j, "forgot backup points") {
		t.Errorf("forget's log: %+v", j.Events)
	}
	// gc's says how its lease's test-and-set was made.
	if j := e.JobOf("gc"); !clitest.LogHas(j, "test-and-set by link(2) under flock") {
		t.Errorf("gc's log: %+v", j.Events)
	}
}

// TestCancelVerifyThroughCatalog starts a verify in another coffer
// process, holds it inside its reads of pack data, and cancels its task
// through the catalog from this process: the verify stops (exit 130) and
// its task ends cancelled, with the request in its log.
func TestCancelVerifyThroughCatalog(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	e.Must("backup", "disk", e.Image("a.img", 4<<20, 2), "--name", "a")
	gate := filepath.Join(e.Dir, "gate")
	e.Vars["COFFER_TEST_GATE_READS"] = gate
	verify := e.Child("verify", "--read-data")
	delete(e.Vars, "COFFER_TEST_GATE_READS")
	if err := verify.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- verify.Wait() }()
	defer func() { _ = os.WriteFile(gate, nil, 0o600) }() // whatever happens, the child ends

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cat, err := catalogopen.Open(ctx, e.Vars["COFFER_CATALOG"])
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	m, err := job.New(ctx, cat, job.Options{PruneEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// The verify's task, running (its reads wait at the gate).
	var id int64
	for id == 0 {
		p, err := m.List(ctx, job.Filter{Kind: job.KindVerify, Status: catalog.StatusRunning})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Tasks) > 0 && p.Tasks[0].Progress.ItemsTotal > 0 {
			id = p.Tasks[0].ID
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("verify ended before it was cancelled: %v", err)
		case <-ctx.Done():
			t.Fatal("no running verify task with its packs counted")
		case <-time.After(50 * time.Millisecond):
		}
	}
	if _, err := m.Cancel(ctx, id, "tester"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var ee interface{ ExitCode() int }
		if !errors.As(err, &ee) || ee.ExitCode() != command.ExitInterrupted {
			t.Fatalf("verify after cancel: %v, want exit %d", err, command.ExitInterrupted)
		}
	case <-ctx.Done():
		t.Fatal("the cancelled verify did not stop")
	}
	j, err := m.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != catalog.StatusCancelled {
		t.Fatalf("verify task after cancel: %s (%s)", j.Status, j.Error)
	}
	lines, err := m.Log(ctx, id, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range lines {
		found = found || strings.Contains(l.Message, "cancel requested by tester")
	}
	if !found {
		t.Fatalf("the verify's log lacks the cancel request: %+v", lines)
	}
}

// TestPolicyCheckShowsMaintenance: policy check validates the maintenance
// section and lists each job with its next runs, marking those its window
// keeps from starting.
func TestPolicyCheckShowsMaintenance(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Config(`
repositories:
  - {name: main, location: /nonexistent/main}
maintenance:
  windows: [{name: night, start: "01:00", end: "05:00"}]
  repositories:
    - repository: main
      window: night
      gc: {schedule: "0 2 * * *"}
      forget: {schedule: "0 12 * * *", keep: {keep-daily: 7}}
`)
	var doc api.PolicyCheck
	if err := json.Unmarshal([]byte(e.Must("policy", "check", "--offline", "--json")), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Maintenance) != 2 {
		t.Fatalf("maintenance: %+v", doc.Maintenance)
	}
	for _, m := range doc.Maintenance {
		if len(m.NextRuns) != 3 {
			t.Fatalf("%s: %d next runs", m.Name, len(m.NextRuns))
		}
		for i, r := range m.NextRuns {
			at := r.At.Local()
			switch m.Name {
			case "main/gc":
				if at.Hour() != 2 || at.Minute() != 0 || !r.Starts || (i > 0 && r.At.Sub(m.NextRuns[i-1].At) != 24*time.Hour) {
					t.Errorf("gc run %d: %+v", i, r)
				}
			case "main/forget":
				if at.Hour() != 12 || r.Starts {
					t.Errorf("forget run %d at noon starts inside a night window: %+v", i, r)
				}
			}
		}
	}
	e.Config("maintenance:\n  repositories:\n    - {repository: nowhere, gc: {schedule: \"@daily\"}}\n")
	if out := e.Expect(command.ExitUsage, "policy", "check", "--offline"); !strings.Contains(out, `unknown repository "nowhere"`) {
		t.Fatalf("a bad maintenance section: %s", out)
	}
}
