package catalogtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// noticeWait bounds the wait for a notice: a failure guard, not a
// measurement (bench/tasks measures the delay).
const noticeWait = 30 * time.Second

// NextNotice returns the next notice, failing the test if none comes.
func NextNotice(t testing.TB, ch <-chan catalog.JobNotice) catalog.JobNotice {
	t.Helper()
	select {
	case n, open := <-ch:
		if !open {
			t.Fatal("the watch ended")
		}
		return n
	case <-time.After(noticeWait):
		t.Fatalf("no notice within %s", noticeWait)
	}
	return catalog.JobNotice{}
}

// lineWatcher is a catalog that sends the notices of lines apart.
type lineWatcher interface {
	WatchJobLines(ctx context.Context) (<-chan catalog.JobNotice, error)
}

// testWatchJobs: a catalog that pushes changes tells a watcher of every
// committed change to a job made by another handle (process), in commit
// order, and of nothing that rolled back; the notices of lines (log and
// progress) only to a watcher of lines, which first hears a resync once
// it listens.
func testWatchJobs(t *testing.T, open Opener) {
	c, other := mustOpen(t, open), mustOpen(t, open)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	notices, err := c.WatchJobs(ctx)
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("this catalog cannot push changes (readers poll): %v", err)
	}
	ok(t, err)
	lw, isLW := c.(lineWatcher)
	if !isLW {
		t.Fatalf("a catalog that pushes changes has no WatchJobLines")
	}
	lines, err := lw.WatchJobLines(ctx)
	ok(t, err)
	same(t, "first notice of lines", NextNotice(t, lines), catalog.JobNotice{What: catalog.NoticeResync})
	want := func(ch <-chan catalog.JobNotice, id int64, what string) {
		t.Helper()
		same(t, "notice", NextNotice(t, ch), catalog.JobNotice{JobID: id, What: what})
	}
	j := &catalog.Job{Kind: catalog.KindVerify, Status: catalog.StatusRunning}
	ok(t, other.CreateJob(ctx, j))
	want(notices, j.ID, catalog.NoticeCreated)
	ok(t, other.AddEvents(ctx, []catalog.Event{{JobID: j.ID, Kind: "line"}, {JobID: j.ID, Kind: "line"}}))
	want(lines, j.ID, catalog.NoticeLog)
	// A write that rolls back announces nothing.
	wantNotFound(t, "AddEvents for a missing job", other.AddEvents(ctx, []catalog.Event{{JobID: j.ID}, {JobID: j.ID + 1000}}))
	wantNotFound(t, "AddEvents for a missing job alone", other.AddEvents(ctx, []catalog.Event{{JobID: j.ID + 1000}}))
	// A worker's lines are announced as anyone's; a fenced worker's are
	// refused, and nothing is announced.
	_, err = other.RegisterWorker(ctx, catalog.Worker{Name: "kvm1", Protocol: 1, Slots: 1}, time.Now())
	ok(t, err)
	ok(t, other.AddWorkerEvents(ctx, "kvm1", 1, []catalog.Event{{JobID: j.ID, Kind: "line"}}))
	want(lines, j.ID, catalog.NoticeLog)
	if err := other.AddWorkerEvents(ctx, "kvm1", 2, []catalog.Event{{JobID: j.ID, Kind: "line"}}); !errors.Is(err, catalog.ErrFenced) {
		t.Fatalf("a line of an epoch never registered: got %v, want ErrFenced", err)
	}
	_, err = other.Heartbeat(ctx, j.ID, &catalog.Progress{BytesDone: 1})
	ok(t, err)
	want(lines, j.ID, catalog.NoticeProgress)
	// The lines' notices, committed before, did not come with the others.
	_, err = other.RequestCancel(ctx, j.ID, "")
	ok(t, err)
	want(notices, j.ID, catalog.NoticeCancel)
	j.Status = catalog.StatusCancelled
	ok(t, other.UpdateJob(ctx, j))
	want(notices, j.ID, catalog.NoticeUpdated)
	// Nor did the others come with the lines'.
	ok(t, other.AddEvents(ctx, []catalog.Event{{JobID: j.ID, Kind: "line"}}))
	want(lines, j.ID, catalog.NoticeLog)
	stop()
	for range notices { // the channels close when the context ends
	}
	for range lines {
	}
}
