package job_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/job"
)

// eventWait bounds a wait for an event: a failure guard, not a
// measurement (bench/tasks measures the delay).
const eventWait = 30 * time.Second

func next(t *testing.T, s *job.Subscription) job.Event {
	t.Helper()
	select {
	case ev, open := <-s.C:
		if !open {
			t.Fatalf("subscription ended early: %v", s.Err())
		}
		return ev
	case <-time.After(eventWait):
		t.Fatalf("no event within %s", eventWait)
	}
	return job.Event{}
}

func wantEnd(t *testing.T, s *job.Subscription) {
	t.Helper()
	select {
	case ev, open := <-s.C:
		if open {
			t.Fatalf("event %+v after the last", ev)
		}
	case <-time.After(eventWait):
		t.Fatalf("subscription not closed within %s", eventWait)
	}
	if err := s.Err(); err != nil {
		t.Fatalf("subscription ended with %v", err)
	}
}

// describe renders an event for comparisons.
func describe(ev job.Event) string {
	switch ev.Type {
	case job.EventLog:
		return fmt.Sprintf("log %d:%s", ev.Line.Seq, ev.Line.Message)
	case job.EventProgress:
		return fmt.Sprintf("progress %d/%d", ev.Job.Progress.BytesDone, ev.Job.Progress.BytesTotal)
	}
	s := "status " + string(ev.Job.Status)
	if !ev.Job.CancelRequested.IsZero() && !ev.Job.Status.Done() {
		s += " (cancel requested)"
	}
	return s
}

// runScript drives a task through lines, a progress sample and its end,
// waiting after each step until the follower saw it: every event comes,
// in order, and nothing else.
func runScript(t *testing.T, h *job.Handle, s *job.Subscription, before []string) {
	t.Helper()
	for _, want := range before {
		same(t, "event", describe(next(t, s)), want)
	}
	h.Log("info", "two", nil)
	same(t, "event", describe(next(t, s)), "log 2:two")
	h.Progress(job.Progress{BytesDone: 5, BytesTotal: 10})
	same(t, "event", describe(next(t, s)), "progress 5/10")
	h.Log("warn", "three", nil)
	h.Log("info", "four", nil)
	same(t, "event", describe(next(t, s)), "log 3:three")
	same(t, "event", describe(next(t, s)), "log 4:four")
	must[job.Record](t)(h.Finish(context.Background(), catalog.StatusSuccess, ""))
	same(t, "event", describe(next(t, s)), "status success")
	wantEnd(t, s)
}

// In one process a follower gets each event as it is recorded: nothing in
// this test waits for a poll (the manager polls every hour).
func TestFollowATaskOfThisProcess(t *testing.T) {
	cat, _ := newCatalog(t)
	m := newManager(t, cat, job.Options{PollInterval: time.Hour})
	ctx := context.Background()
	h := must[*job.Handle](t)(m.Start(ctx, job.Spec{Kind: job.KindCopy}))
	h.Log("info", "one", nil)
	ok(t, h.Flush(ctx))
	s := must[*job.Subscription](t)(m.Subscribe(ctx, h.ID(), 0))
	runScript(t, h, s, []string{"status running", "log 1:one"})
}

// Another process (here a second manager on its own handle of the file)
// follows the task through the catalog: polled on SQLite.
func TestFollowATaskOfAnotherProcess(t *testing.T) {
	cat, path := newCatalog(t)
	runner := newManager(t, cat, job.Options{})
	follower := newManager(t, openCatalog(t, path), job.Options{})
	ctx := context.Background()
	h := must[*job.Handle](t)(runner.Start(ctx, job.Spec{Kind: job.KindCopy}))
	h.Log("info", "one", nil)
	ok(t, h.Flush(ctx))
	s := must[*job.Subscription](t)(follower.Subscribe(ctx, h.ID(), 0))
	runScript(t, h, s, []string{"status running", "log 1:one"})
}

// A follower that reconnects gives the last line it got and continues from
// the next; a task already finished delivers its log, then its final
// state as the last event, then ends.
func TestFollowFromALine(t *testing.T) {
	cat, _ := newCatalog(t)
	m := newManager(t, cat, job.Options{})
	ctx := context.Background()
	h := must[*job.Handle](t)(m.Start(ctx, job.Spec{Kind: job.KindCopy}))
	for i := range 5 {
		h.Log("info", fmt.Sprint(i+1), nil)
	}
	must[job.Record](t)(h.Finish(ctx, catalog.StatusPartial, "1 of 3 disks failed"))
	s := must[*job.Subscription](t)(m.Subscribe(ctx, h.ID(), 3))
	for _, want := range []string{"log 4:4", "log 5:5", "status partial"} {
		same(t, "event", describe(next(t, s)), want)
	}
	wantEnd(t, s)
	if _, err := m.Subscribe(ctx, h.ID()+100, 0); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("following a missing task: %v", err)
	}
}

// Following every task: each new task's creation, lines, progress and end,
// from this process and from others.
func TestFollowEveryTask(t *testing.T) {
	cat, path := newCatalog(t)
	here := newManager(t, cat, job.Options{})
	other := newManager(t, openCatalog(t, path), job.Options{})
	ctx := context.Background()
	s := must[*job.Subscription](t)(here.Subscribe(ctx, 0, 0))
	for _, runner := range []*job.Manager{here, other} {
		h := must[*job.Handle](t)(runner.Start(ctx, job.Spec{Kind: job.KindGC}))
		h.Log("info", "one", nil)
		same(t, "first event", describe(next(t, s)), "status running")
		same(t, "event", describe(next(t, s)), "log 1:one")
		h.Progress(job.Progress{BytesDone: 1, BytesTotal: 2})
		same(t, "event", describe(next(t, s)), "progress 1/2")
		must[job.Record](t)(h.Finish(ctx, catalog.StatusFailed, "no space"))
		ev := next(t, s)
		same(t, "last event", describe(ev), "status failed")
		same(t, "task of the event", ev.JobID, h.ID())
	}
	s.Close()
	for range s.C {
	}
}

// A reader that does not keep up is dropped (it subscribes again from its
// last line) instead of holding up the task.
func TestSlowFollowerIsDropped(t *testing.T) {
	cat, _ := newCatalog(t)
	m := newManager(t, cat, job.Options{})
	ctx := context.Background()
	h := must[*job.Handle](t)(m.Start(ctx, job.Spec{Kind: job.KindCopy}))
	defer h.Finish(ctx, catalog.StatusSuccess, "")
	s := must[*job.Subscription](t)(m.Subscribe(ctx, h.ID(), 0))
	lines := make([]job.Line, 10001)
	for i := range lines {
		lines[i] = job.Line{Level: "info", Kind: "log", Message: "x"}
	}
	h.Record(lines...)
	ok(t, h.Flush(ctx))
	for range s.C {
	}
	if !errors.Is(s.Err(), job.ErrLagged) {
		t.Fatalf("a follower that read nothing of 10001 lines ended with %v, want ErrLagged", s.Err())
	}
}

// A subscription ends with its context.
func TestFollowingEndsWithTheContext(t *testing.T) {
	cat, _ := newCatalog(t)
	m := newManager(t, cat, job.Options{})
	h := must[*job.Handle](t)(m.Start(context.Background(), job.Spec{Kind: job.KindCopy}))
	defer h.Finish(context.Background(), catalog.StatusSuccess, "")
	ctx, cancel := context.WithCancel(context.Background())
	s := must[*job.Subscription](t)(m.Subscribe(ctx, h.ID(), 0))
	same(t, "first event", describe(next(t, s)), "status running")
	cancel()
	wantEnd(t, s)
}
