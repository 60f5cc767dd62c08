package job_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/repo"
)

func waitDone(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(eventWait):
		t.Fatalf("task context not cancelled within %s", eventWait)
	}
}

func wantCancelled(t *testing.T, ctx context.Context) {
	t.Helper()
	if cause := context.Cause(ctx); !errors.Is(cause, job.ErrCancelled) {
		t.Fatalf("task context ended by %v, want job.ErrCancelled", cause)
	}
}

func TestCancelInThisProcessIsImmediate(t *testing.T) {
	cat, _ := newCatalog(t)
	m := newManager(t, cat, job.Options{PollInterval: time.Hour})
	ctx := context.Background()
	h := must[*job.Handle](t)(m.Start(ctx, job.Spec{Kind: job.KindRestore}))
	got := must[job.Record](t)(m.Cancel(ctx, h.ID(), "bob"))
	select {
	case <-h.Context().Done():
	default:
		t.Fatal("Cancel returned before the task's context was cancelled")
	}
	wantCancelled(t, h.Context())
	if got.CancelRequested.IsZero() {
		t.Fatalf("Cancel returned %+v", got)
	}
	fin := must[job.Record](t)(h.End(ctx, h.Context().Err()))
	if fin.Status != catalog.StatusCancelled || fin.CancelRequested.IsZero() {
		t.Fatalf("cancelled task: %+v", fin)
	}
	same(t, "log", messages(must[[]job.Line](t)(m.Log(ctx, h.ID(), 0, 0))), []string{"1:cancel requested by bob"})

	_, err := m.Cancel(ctx, h.ID(), "bob")
	if !errors.Is(err, job.ErrFinished) {
		t.Fatalf("cancel of a finished task: %v", err)
	}
	if _, err := m.Cancel(ctx, h.ID()+100, "bob"); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("cancel of a missing task: %v", err)
	}
}

// Another process's manager (here a second manager on its own handle of
// the SQLite file) cancels the task through the catalog: the running
// process polls the flag and cancels the context.
func TestCancelFromAnotherManager(t *testing.T) {
	cat, path := newCatalog(t)
	runner := newManager(t, cat, job.Options{})
	other := newManager(t, openCatalog(t, path), job.Options{})
	ctx := context.Background()
	h := must[*job.Handle](t)(runner.Start(ctx, job.Spec{Kind: job.KindGC}))
	s := must[*job.Subscription](t)(other.Subscribe(ctx, h.ID(), 0))
	same(t, "event", describe(next(t, s)), "status running")
	must[job.Record](t)(other.Cancel(ctx, h.ID(), "carol"))
	waitDone(t, h.Context())
	wantCancelled(t, h.Context())
	must[job.Record](t)(h.End(ctx, context.Cause(h.Context())))
	// The follower may see the request before the task ends, or only the
	// end: then the request is in the final state.
	var seen []string
	for ev := range s.C {
		if d := describe(ev); d != "status running (cancel requested)" {
			seen = append(seen, d)
		}
	}
	same(t, "events", seen, []string{"log 1:cancel requested by carol", "status cancelled"})
	ok(t, s.Err())
}

// deadPID returns the PID of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	ok(t, cmd.Run())
	return cmd.Process.Pid
}

// Tasks whose process is gone are marked interrupted when a manager
// starts: at once on this host, after StaleAfter without a heartbeat from
// another host. Live ones are left alone.
func TestInterruptedTasksAreMarked(t *testing.T) {
	cat, _ := newCatalog(t)
	ctx := context.Background()
	now := time.Now()
	self, err := repo.ProcessStart(os.Getpid())
	ok(t, err)
	rows := map[string]catalog.Job{
		"dead process here":       {Owner: catalog.Owner{Host: "here", PID: deadPID(t), Start: 1}, Heartbeat: now},
		"reused PID here":         {Owner: catalog.Owner{Host: "here", PID: os.Getpid(), Start: self + 1}, Heartbeat: now},
		"silent on another host":  {Owner: catalog.Owner{Host: "there", PID: 1}, Heartbeat: now.Add(-3 * time.Minute)},
		"from before owners":      {CreatedAt: now.Add(-time.Hour)},
		"alive here, silent":      {Owner: catalog.Owner{Host: "here", PID: os.Getpid(), Start: self}, Heartbeat: now.Add(-time.Hour)},
		"beating on another host": {Owner: catalog.Owner{Host: "there", PID: 1}, Heartbeat: now},
	}
	ids := map[string]int64{}
	for name, j := range rows {
		j.Kind, j.Status = job.KindRestore, catalog.StatusRunning
		ok(t, cat.CreateJob(ctx, &j))
		ids[name] = j.ID
	}
	m := newManager(t, cat, job.Options{Host: "here", StaleAfter: 2 * time.Minute})
	for name, id := range ids {
		got := must[job.Record](t)(m.Get(ctx, id))
		interrupted := got.Status == catalog.StatusFailed && strings.HasPrefix(got.Error, "interrupted: ")
		wantInterrupted := !strings.Contains(name, "alive") && !strings.Contains(name, "beating")
		if interrupted != wantInterrupted || !interrupted && got.Status != catalog.StatusRunning {
			t.Errorf("%s: %s %q", name, got.Status, got.Error)
		}
		if interrupted {
			lines := must[[]job.Line](t)(m.Log(ctx, id, 0, 0))
			if len(lines) != 1 || lines[0].Level != "error" || lines[0].Message != got.Error {
				t.Errorf("%s: log %+v", name, lines)
			}
		}
	}
	if got := must[job.Record](t)(m.Get(ctx, ids["dead process here"])); !strings.Contains(got.Error, "is gone") {
		t.Errorf("reason given: %q", got.Error)
	}
	// An hour later, seen from another host, where only heartbeats tell,
	// both live ones have been silent too long.
	newManager(t, cat, job.Options{Host: "elsewhere", Now: func() time.Time { return now.Add(time.Hour) }})
	for _, name := range []string{"beating on another host", "alive here, silent"} {
		if got := must[job.Record](t)(m.Get(ctx, ids[name])); !strings.Contains(got.Error, "showed no sign of life since") {
			t.Errorf("%s: reason given: %q", name, got.Error)
		}
	}
	// A process that dies later is found by the next sweep, once.
	j := catalog.Job{Kind: job.KindGC, Status: catalog.StatusRunning, Owner: catalog.Owner{Host: "here", PID: deadPID(t)}}
	ok(t, cat.CreateJob(ctx, &j))
	same(t, "marked by a sweep", must[int](t)(m.Recover(ctx)), 1)
	same(t, "marked by the next sweep", must[int](t)(m.Recover(ctx)), 0)
}

// Cancelling a task whose process is gone ends it at once.
func TestCancelATaskWhoseProcessIsGone(t *testing.T) {
	cat, _ := newCatalog(t)
	ctx := context.Background()
	j := catalog.Job{Kind: job.KindVerify, Status: catalog.StatusRunning,
		Owner: catalog.Owner{Host: "here", PID: deadPID(t)}, Heartbeat: time.Now()}
	ok(t, cat.CreateJob(ctx, &j))
	// Its owner died after this manager's start-up sweep.
	m := newManager(t, cat, job.Options{Host: "here"})
	ok(t, cat.UpdateJob(ctx, &j)) // running again
	got := must[job.Record](t)(m.Cancel(ctx, j.ID, "dave"))
	if got.Status != catalog.StatusCancelled || !strings.Contains(got.Error, "cancel requested by dave") || !strings.Contains(got.Error, "is gone") {
		t.Fatalf("cancelled task of a gone process: %s %q", got.Status, got.Error)
	}
}

// A command that only reads tasks marks the interrupted ones first,
// without starting a manager.
func TestMarkInterruptedWithoutAManager(t *testing.T) {
	cat, _ := newCatalog(t)
	ctx := context.Background()
	dead := catalog.Job{Kind: job.KindRestore, Status: catalog.StatusRunning, Owner: catalog.Owner{Host: "here", PID: deadPID(t)}}
	ok(t, cat.CreateJob(ctx, &dead))
	same(t, "marked", must[int](t)(job.MarkInterrupted(ctx, cat, job.Options{Host: "here"})), 1)
	if got := must[catalog.Job](t)(cat.GetJob(ctx, dead.ID)); got.Status != catalog.StatusFailed || !strings.HasPrefix(got.Error, "interrupted: ") {
		t.Fatalf("task of a dead process: %s %q", got.Status, got.Error)
	}
}
