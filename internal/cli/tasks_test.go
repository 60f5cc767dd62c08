package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/task"
)

// gatedReads holds every read of pack data until the gate file exists
// or the read's context ends: a verify that reads data is then running,
// deterministically, for as long as a test needs.
type gatedReads struct {
	store.Store
	gate string
}

func (g gatedReads) Read(ctx context.Context, name string, off, length int64) (io.ReadCloser, error) {
	if strings.HasPrefix(name, "data/") {
		for {
			if _, err := os.Stat(g.gate); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(20 * time.Millisecond): // polls a file; no test timing depends on it
			}
		}
	}
	return g.Store.Read(ctx, name, off, length)
}

// jobOf returns the newest job of a kind, with its log.
func (e *env) jobOf(kind string) api.Job {
	e.t.Helper()
	var jobs []api.Job
	if err := json.Unmarshal([]byte(e.must("jobs", "--json", "--kind", kind)), &jobs); err != nil || len(jobs) == 0 {
		e.t.Fatalf("no %s job recorded (%v)", kind, err)
	}
	var j api.Job
	if err := json.Unmarshal([]byte(e.must("job", "show", "--json", itoa(jobs[0].ID))), &j); err != nil {
		e.t.Fatal(err)
	}
	return j
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

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
	e := newEnv(t)
	e.must("init")
	img := e.image("a.img", 4<<20, 2)
	e.must("backup", "disk", img, "--name", "a")
	e.must("backup", "disk", img, "--name", "a")
	e.must("restore", "latest", "--to", filepath.Join(e.dir, "out.raw"))
	e.must("verify", "--read-data")
	e.must("forget", "--keep-last", "1")
	e.must("gc")
	user := localUserName(t)
	for _, kind := range []string{"backup-disk", "restore", "verify", "forget", "gc"} {
		j := e.jobOf(kind)
		if j.Status != "success" || j.Object != "/repositories/default" || j.User != user {
			t.Errorf("%s job: status %s, object %q, user %q; want success, /repositories/default, %q", kind, j.Status, j.Object, j.User, user)
		}
		if kind == "verify" && (j.Progress == nil || j.Progress.ItemsTotal == 0 || j.Progress.ItemsDone != j.Progress.ItemsTotal) {
			t.Errorf("verify job's progress: %+v, want every pack done", j.Progress)
		}
	}
	// A failing operation is recorded failed with its error in the log's end.
	e.expect(ExitNoRepo, "restore", "ffffffff", "--to", filepath.Join(e.dir, "none.raw"))
	if j := e.jobOf("restore"); j.Status != "failed" || !strings.Contains(j.Error, "ffffffff") {
		t.Errorf("failed restore recorded as %s (%q)", j.Status, j.Error)
	}
	// The log of forget says what it removed.
	if j := e.jobOf("forget"); !logHas(j, "forgot backup points") {
		t.Errorf("forget's log: %+v", j.Events)
	}
	// gc's says how its lease's test-and-set was made.
	if j := e.jobOf("gc"); !logHas(j, "test-and-set by link(2) under flock") {
		t.Errorf("gc's log: %+v", j.Events)
	}
}

func logHas(j api.Job, text string) bool {
	for _, ev := range j.Events {
		if strings.Contains(ev.Message, text) {
			return true
		}
	}
	return false
}

// TestCancelVerifyThroughCatalog starts a verify in another coffer
// process, holds it inside its reads of pack data, and cancels its task
// through the catalog from this process: the verify stops (exit 130) and
// its task ends cancelled, with the request in its log.
func TestCancelVerifyThroughCatalog(t *testing.T) {
	e := newEnv(t)
	e.must("init")
	e.must("backup", "disk", e.image("a.img", 4<<20, 2), "--name", "a")
	gate := filepath.Join(e.dir, "gate")
	e.vars["COFFER_TEST_GATE_READS"] = gate
	verify := e.child("verify", "--read-data")
	delete(e.vars, "COFFER_TEST_GATE_READS")
	if err := verify.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- verify.Wait() }()
	defer func() { _ = os.WriteFile(gate, nil, 0o600) }() // whatever happens, the child ends

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cat, err := catalogopen.Open(ctx, e.vars["COFFER_CATALOG"])
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	m, err := task.New(ctx, cat, task.Options{PruneEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// The verify's task, running (its reads wait at the gate).
	var id int64
	for id == 0 {
		p, err := m.List(ctx, task.Filter{Kind: task.KindVerify, Status: catalog.StatusRunning})
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
		if !errors.As(err, &ee) || ee.ExitCode() != ExitInterrupted {
			t.Fatalf("verify after cancel: %v, want exit %d", err, ExitInterrupted)
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
	e := newEnv(t)
	e.config(`
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
	if err := json.Unmarshal([]byte(e.must("policy", "check", "--offline", "--json")), &doc); err != nil {
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
	e.config("maintenance:\n  repositories:\n    - {repository: nowhere, gc: {schedule: \"@daily\"}}\n")
	if out := e.expect(ExitUsage, "policy", "check", "--offline"); !strings.Contains(out, `unknown repository "nowhere"`) {
		t.Fatalf("a bad maintenance section: %s", out)
	}
}
