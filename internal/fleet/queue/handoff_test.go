package queue_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/fleet/queue"
)

// TestHandOffRunsOnNamedWorker: operations handed off by ID to workers a
// and b run on the worker each names, with that worker's configuration
// (its own repository), and their documents come back to the submitter.
func TestHandOffRunsOnNamedWorker(t *testing.T) {
	pool, _ := startCatalog(t)
	dirA := startWorker(t, pool, "a", nil)
	dirB := startWorker(t, pool, "b", nil)
	srv := startServer(t, pool)
	ctx := context.Background()

	submit := func(worker, op string, in any) *queue.Outcome {
		t.Helper()
		s, err := srv.Submit(ctx, queue.Unit{Worker: worker, Epoch: 1, Operation: op, Input: in})
		if err != nil {
			t.Fatal(err)
		}
		o := waitOutcome(t, srv, s.ID, 30*time.Second)
		if err := o.Err(); err != nil {
			t.Fatalf("%s on %s: %v", op, worker, err)
		}
		if want := cmp.Or(worker, "server"); o.Worker != want {
			t.Fatalf("%s for worker %s ran on %q", op, worker, o.Worker)
		}
		return o
	}
	for worker, dir := range map[string]string{"a": dirA, "b": dirB} {
		o := submit(worker, "init-repository", &api.InitRepositoryInput{})
		var repo api.Repository
		if err := json.Unmarshal(o.Document, &repo); err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(dir, "repo"); repo.Location != want {
			t.Fatalf("worker %s created the repository at %s, not in its own configuration's %s", worker, repo.Location, want)
		}
		if _, err := os.Stat(filepath.Join(dir, "repo")); err != nil {
			t.Fatalf("worker %s: %v", worker, err)
		}
	}
	var stats api.Stats
	if err := json.Unmarshal(submit("b", "stats", &api.RepoParam{}).Document, &stats); err != nil || stats.Points != 0 {
		t.Fatalf("stats of b's new repository: %+v, %v", stats, err)
	}
	var points []api.BackupPoint
	if err := json.Unmarshal(submit("a", "list-points", &api.ListPointsInput{}).Document, &points); err != nil || len(points) != 0 {
		t.Fatalf("points of a's new repository: %v, %v", points, err)
	}

	// A unit with no worker named runs on a server (queue srv).
	if o := submit("", "init-repository", &api.InitRepositoryInput{}); o.Worker != "server" {
		t.Fatalf("a unit for the servers ran on %q", o.Worker)
	}

	// An operation's error comes back with its class: a's repository
	// exists already.
	s, err := srv.Submit(ctx, queue.Unit{Worker: "a", Epoch: 1, Operation: "init-repository", Input: &api.InitRepositoryInput{}})
	if err != nil {
		t.Fatal(err)
	}
	if o := waitOutcome(t, srv, s.ID, 30*time.Second); o.ErrorClass == "" || o.Worker != "a" {
		t.Fatalf("a second init on a: %+v", o)
	}

	// A panic is an outcome too, and wakes the waiter at once (River's
	// own recovery would leave it to Wait's safety net, 5 s).
	s, err = srv.Submit(ctx, queue.Unit{Worker: "b", Epoch: 1, Operation: "test-panic", Input: &struct{}{}})
	if err != nil {
		t.Fatal(err)
	}
	if o := waitOutcome(t, srv, s.ID, 2*time.Second); o.ErrorClass != string(api.Internal) || !strings.Contains(o.Error, "on purpose") {
		t.Fatalf("a panic's outcome: %+v", o)
	}
}

// TestFencedJobCompletesWithoutRunning: a job granted to an epoch the
// registry no longer holds (the worker was replaced), or to an older
// epoch than the worker process's, completes as a no-op.
func TestFencedJobCompletesWithoutRunning(t *testing.T) {
	pool, _ := startCatalog(t)
	replaced := errors.New("worker a is at epoch 1 in the registry")
	dir := startWorker(t, pool, "a", func(_ context.Context, worker string, epoch int64) error {
		if worker == "a" && epoch == 1 {
			return nil
		}
		return replaced
	})
	srv := startServer(t, pool)
	for _, epoch := range []int64{0, 2} {
		s, err := srv.Submit(context.Background(), queue.Unit{Worker: "a", Epoch: epoch, Operation: "init-repository", Input: &api.InitRepositoryInput{}})
		if err != nil {
			t.Fatal(err)
		}
		o := waitOutcome(t, srv, s.ID, 30*time.Second)
		if !o.Fenced || o.Err() == nil || o.Document != nil {
			t.Fatalf("a job of epoch %d on worker a at epoch 1: %+v", epoch, o)
		}
		if _, err := os.Stat(filepath.Join(dir, "repo")); !os.IsNotExist(err) {
			t.Fatalf("a fenced init ran: %v", err)
		}
	}
}

// TestReplayedGrantIsSkipped: a grant handed off twice (a replayed
// transaction) is one River job; a grant's input never carries a secret.
func TestReplayedGrantIsSkipped(t *testing.T) {
	pool, _ := startCatalog(t)
	srv := startServer(t, pool)
	ctx := context.Background()
	u := queue.Unit{Worker: "nobody", Epoch: 1, Operation: "stats", Input: &api.RepoParam{}, Job: 7, Task: 3, Attempt: 1}
	first, err := srv.Submit(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	again, err := srv.Submit(ctx, u)
	if err != nil || !again.Duplicate || again.ID != first.ID {
		t.Fatalf("the replay of grant %+v: %+v, %v (first %+v)", u, again, err, first)
	}
	u.Attempt = 2
	if next, err := srv.Submit(ctx, u); err != nil || next.Duplicate {
		t.Fatalf("the next attempt: %+v, %v", next, err)
	}

	_, err = srv.Submit(ctx, queue.Unit{Worker: "a", Operation: "add-key", Input: &api.AddKeyInput{Body: api.AddKeyRequest{Password: "s3cret"}}})
	if err == nil || !strings.Contains(err.Error(), "Body.Password") {
		t.Fatalf("a password in a job's arguments: %v", err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM river.river_job WHERE args::text LIKE '%s3cret%'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d jobs hold the password (%v)", n, err)
	}
}

// TestCancelEndsRunningOperation: Cancel ends a running operation on its
// worker within 2 s, and a job not yet started never runs.
func TestCancelEndsRunningOperation(t *testing.T) {
	pool, _ := startCatalog(t)
	startWorker(t, pool, "a", nil)
	srv := startServer(t, pool)
	ctx := context.Background()
	in := &sleepInput{}
	in.Body.Tag, in.Body.Seconds = "long", 3600
	s, err := srv.Submit(ctx, queue.Unit{Worker: "a", Epoch: 1, Operation: "test-sleep", Input: in})
	if err != nil {
		t.Fatal(err)
	}
	if tag := <-sleepStarted; tag != "long" {
		t.Fatalf("started %q", tag)
	}
	start := time.Now()
	if err := srv.Cancel(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	o := waitOutcome(t, srv, s.ID, 2*time.Second)
	t.Logf("cancel to outcome: %v", time.Since(start))
	if o.ErrorClass != string(api.Cancelled) || o.Worker != "a" {
		t.Fatalf("the cancelled operation's outcome: %+v", o)
	}

	queued, err := srv.Submit(ctx, queue.Unit{Worker: "nobody", Epoch: 1, Operation: "test-sleep", Input: in})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Cancel(ctx, queued.ID); err != nil {
		t.Fatal(err)
	}
	if o := waitOutcome(t, srv, queued.ID, 2*time.Second); o.ErrorClass != string(api.Cancelled) || o.Worker != "" {
		t.Fatalf("a job cancelled before it started: %+v", o)
	}
}

// TestWaitSubmittedHearsAnEndBeforeTheWait: a hand-off that ended before
// its submitter began to wait (its NOTIFY heard with nobody waiting) is
// returned at once by WaitSubmitted, which reads the job's row only once
// its end is announced: had the notice been lost, it would sleep to its
// recheck (5 s), past this test's bound.
func TestWaitSubmittedHearsAnEndBeforeTheWait(t *testing.T) {
	pool, _ := startCatalog(t)
	startWorker(t, pool, "a", nil)
	srv := startServer(t, pool)
	ctx := context.Background()
	submit := func() queue.Submitted {
		t.Helper()
		s, err := srv.Submit(ctx, queue.Unit{Worker: "a", Epoch: 1, Operation: "init-repository", Input: &api.InitRepositoryInput{}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// The first submit starts the client's listener; its Wait returns
	// once the listener holds.
	waitOutcome(t, srv, submit().ID, 30*time.Second)
	s := submit()
	if queue.Heard(s) == 0 {
		t.Fatal("a submit after the listener holds was not taken under it")
	}
	waitOutcome(t, srv, s.ID, 30*time.Second) // ended: its notice was heard
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	o, err := srv.WaitSubmitted(wctx, s)
	if err != nil {
		t.Fatalf("WaitSubmitted of a hand-off that had ended: %v", err)
	}
	if o.Worker != "a" {
		t.Fatalf("outcome %+v", o)
	}
}
