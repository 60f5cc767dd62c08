package catalogtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// The control plane's tasks are jobs: these tests cover what schema
// version 3 added (who, what, progress, owner, cancel requests, the log's
// line numbers, listing filters and paging, pruning).

func testJobTaskFields(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	j := &catalog.Job{Kind: catalog.KindRestoreVM, Repository: "main", Status: catalog.StatusRunning, Worker: "w1",
		CreatedAt: at(0), StartedAt: at(time.Second), Object: "/connections/kvm1/vm/web-1", VM: "web-1",
		User: "alice@pam", Token: "alice@pam!ci",
		Progress: catalog.Progress{BytesDone: 3 << 30, BytesTotal: 10 << 30, BytesPerSecond: 123456789.25,
			ETA: 95 * time.Second, ItemsDone: 2, ItemsTotal: 3},
		Owner:     catalog.Owner{Host: "backup-1", PID: 4242, Start: 1<<40 + 7},
		Heartbeat: at(2 * time.Second),
		// Neither is CreateJob's to set: only RequestCancel and AddEvents.
		CancelRequested: at(time.Hour), LogLines: 99}
	ok(t, c.CreateJob(ctx, j))
	want := *j
	want.CancelRequested, want.LogLines = time.Time{}, 0
	got, err := c.GetJob(ctx, j.ID)
	ok(t, err)
	same(t, "job with every task field", got, want)

	// Progress is stored to the second; an update rewrites it and the
	// rest, but not what other processes change.
	_, err = c.RequestCancel(ctx, j.ID, "")
	ok(t, err)
	ok(t, c.AddEvents(ctx, []catalog.Event{{JobID: j.ID, Kind: "line"}}))
	upd := want
	upd.Status, upd.FinishedAt, upd.Error = catalog.StatusCancelled, at(time.Minute), "cancelled by bob"
	upd.Progress.ETA = 1500 * time.Millisecond
	upd.Owner, upd.User = catalog.Owner{Host: "backup-2", PID: 1}, "bob"
	ok(t, c.UpdateJob(ctx, &upd))
	got, err = c.GetJob(ctx, j.ID)
	ok(t, err)
	if got.CancelRequested.IsZero() || got.LogLines != 1 {
		t.Fatalf("UpdateJob touched the cancel request (%v) or the log's length (%d)", got.CancelRequested, got.LogLines)
	}
	want = upd
	want.Progress.ETA = time.Second
	want.CancelRequested, want.LogLines = got.CancelRequested, 1
	same(t, "updated job", got, want)
}

func testJobListing(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	var all []*catalog.Job
	add := func(j *catalog.Job) *catalog.Job {
		ok(t, c.CreateJob(ctx, j))
		all = append(all, j)
		return j
	}
	run := add(&catalog.Job{Kind: catalog.KindBackupPolicy, Policy: "nightly", Object: "/policies/nightly", User: "alice",
		Status: catalog.StatusRunning, CreatedAt: at(0)})
	ok(t, c.CreateTasks(ctx, []*catalog.Task{{JobID: run.ID, VMID: "vm-17", VMName: "web"}, {JobID: run.ID, VMID: "vm-18", VMName: "db"}}))
	restore := add(&catalog.Job{Kind: catalog.KindRestoreVM, Object: "/connections/kvm1/vm/web", VM: "web", User: "bob",
		Status: catalog.StatusSuccess, CreatedAt: at(time.Minute)})
	gc := add(&catalog.Job{Kind: catalog.KindGC, Object: "/repositories/main", Repository: "main", User: "alice",
		Status: catalog.StatusQueued, CreatedAt: at(2 * time.Minute)})
	// Three at one instant: ties go by ID, newest first.
	var tied []*catalog.Job
	for range 3 {
		tied = append(tied, add(&catalog.Job{Kind: catalog.KindVerify, User: "carol", Status: catalog.StatusFailed, CreatedAt: at(3 * time.Minute)}))
	}
	list := func(f catalog.JobFilter) []int64 {
		t.Helper()
		jobs, err := c.ListJobs(ctx, f)
		ok(t, err)
		return ids(jobs, jobID)
	}
	same(t, "by kind", list(catalog.JobFilter{Kind: catalog.KindGC}), []int64{gc.ID})
	same(t, "by user", list(catalog.JobFilter{User: "alice"}), []int64{gc.ID, run.ID})
	same(t, "by object", list(catalog.JobFilter{Object: "/repositories/main"}), []int64{gc.ID})
	same(t, "by VM name: the restore of it and the run that backed it up", list(catalog.JobFilter{VM: "web"}), []int64{restore.ID, run.ID})
	same(t, "by VM ID among a run's tasks", list(catalog.JobFilter{VM: "vm-18"}), []int64{run.ID})
	same(t, "unfinished", list(catalog.JobFilter{Unfinished: true}), []int64{gc.ID, run.ID})
	same(t, "since and until", list(catalog.JobFilter{Since: at(time.Minute), Until: at(3 * time.Minute)}), []int64{gc.ID, restore.ID})
	same(t, "by IDs", list(catalog.JobFilter{IDs: []int64{restore.ID, tied[1].ID, 1 << 40}}), []int64{tied[1].ID, restore.ID})
	same(t, "above an ID", list(catalog.JobFilter{AboveID: gc.ID}), []int64{tied[2].ID, tied[1].ID, tied[0].ID})

	// Paging with a cursor walks every job once, in order, through ties,
	// and a job added meanwhile (newer) does not shift the pages.
	var paged []int64
	f := catalog.JobFilter{Limit: 2}
	for page := 0; ; page++ {
		jobs, err := c.ListJobs(ctx, f)
		ok(t, err)
		if len(jobs) == 0 {
			break
		}
		if page > len(all) {
			t.Fatal("paging does not end")
		}
		paged = append(paged, ids(jobs, jobID)...)
		f.After = jobs[len(jobs)-1].Cursor()
		if page == 0 {
			add(&catalog.Job{Kind: catalog.KindCopy, CreatedAt: at(time.Hour)})
		}
	}
	same(t, "paged listing", paged, []int64{tied[2].ID, tied[1].ID, tied[0].ID, gc.ID, restore.ID, run.ID})
	same(t, "a page after a cursor with filters", list(catalog.JobFilter{User: "carol", After: tied[2].Cursor(), Limit: 1}), []int64{tied[1].ID})
}

func testJobLog(t *testing.T, open Opener) {
	c, other := mustOpen(t, open), mustOpen(t, open)
	ctx := context.Background()
	a, b := &catalog.Job{Kind: catalog.KindVerify}, &catalog.Job{Kind: catalog.KindGC}
	ok(t, c.CreateJob(ctx, a))
	ok(t, c.CreateJob(ctx, b))
	// Lines of two jobs, interleaved, from two handles (processes).
	for i := range 5 {
		batch := []catalog.Event{
			{JobID: a.ID, Level: "info", Kind: "line", Message: fmt.Sprintf("a%d", 2*i)},
			{JobID: b.ID, Level: "info", Kind: "line", Message: fmt.Sprintf("b%d", i)},
			{JobID: a.ID, Level: "info", Kind: "line", Message: fmt.Sprintf("a%d", 2*i+1)},
		}
		ok(t, []catalog.Catalog{c, other}[i%2].AddEvents(ctx, batch))
	}
	messages := func(es []catalog.Event) []string {
		out := make([]string, len(es))
		for i, e := range es {
			if e.Seq == 0 || e.JobID == 0 {
				t.Fatalf("log line without a number or job: %+v", e)
			}
			out[i] = fmt.Sprintf("%d:%s", e.Seq, e.Message)
		}
		return out
	}
	log := func(id, after int64, limit int) []string {
		t.Helper()
		es, err := c.JobLog(ctx, id, after, limit)
		ok(t, err)
		return messages(es)
	}
	same(t, "whole log of a", log(a.ID, 0, 0), []string{"1:a0", "2:a1", "3:a2", "4:a3", "5:a4", "6:a5", "7:a6", "8:a7", "9:a8", "10:a9"})
	same(t, "a page from line 4", log(a.ID, 3, 3), []string{"4:a3", "5:a4", "6:a5"})
	same(t, "past the end", log(a.ID, 10, 5), []string{})
	same(t, "log of b", log(b.ID, 2, 0), []string{"3:b2", "4:b3", "5:b4"})
	got, err := other.GetJob(ctx, a.ID)
	ok(t, err)
	same(t, "log lines of a", got.LogLines, int64(10))
	_, err = c.JobLog(ctx, a.ID+1000, 0, 0)
	ok(t, err) // a missing job has an empty log
}

// testConcurrentLogWriters has several handles append to one job's log at
// once: every line gets its own number, the numbers have no gap, and each
// writer's lines keep their order.
func testConcurrentLogWriters(t *testing.T, open Opener) {
	const handles, writers, batches, perBatch = 3, 3, 15, 4
	ctx := context.Background()
	cats := make([]catalog.Catalog, handles)
	for i := range cats {
		cats[i] = mustOpen(t, open)
	}
	j := &catalog.Job{Kind: catalog.KindCopy, Status: catalog.StatusRunning}
	ok(t, cats[0].CreateJob(ctx, j))
	g, gctx := errgroup.WithContext(ctx)
	for h := range handles {
		for w := range writers {
			g.Go(func() error {
				for b := range batches {
					batch := make([]catalog.Event, perBatch)
					for i := range batch {
						batch[i] = catalog.Event{JobID: j.ID, Kind: "line", Message: fmt.Sprintf("%d/%d", h, w),
							Fields: map[string]any{"n": b*perBatch + i}}
					}
					if err := cats[h].AddEvents(gctx, batch); err != nil {
						return err
					}
				}
				return nil
			})
		}
	}
	ok(t, g.Wait())
	lines, err := cats[0].JobLog(ctx, j.ID, 0, 0)
	ok(t, err)
	total := handles * writers * batches * perBatch
	same(t, "lines in the log", len(lines), total)
	next := map[string]float64{}
	for i, l := range lines {
		if l.Seq != int64(i+1) {
			t.Fatalf("line %d has number %d: numbers must run 1, 2, 3... without gaps", i+1, l.Seq)
		}
		n := l.Fields["n"].(float64)
		if n != next[l.Message] {
			t.Fatalf("writer %s: line %v came where %v was due", l.Message, n, next[l.Message])
		}
		next[l.Message]++
	}
	got, err := cats[1].GetJob(ctx, j.ID)
	ok(t, err)
	same(t, "log lines", got.LogLines, int64(total))
}

func testHeartbeatAndCancel(t *testing.T, open Opener) {
	c, other := mustOpen(t, open), mustOpen(t, open)
	ctx := context.Background()
	j := &catalog.Job{Kind: catalog.KindRestore, Status: catalog.StatusRunning, Progress: catalog.Progress{BytesTotal: 100}}
	ok(t, c.CreateJob(ctx, j))

	before := time.Now().Add(-time.Second)
	cancelAt, err := c.Heartbeat(ctx, j.ID, nil)
	ok(t, err)
	if !cancelAt.IsZero() {
		t.Fatalf("heartbeat reports a cancel request (%v) nobody made", cancelAt)
	}
	got, err := other.GetJob(ctx, j.ID)
	ok(t, err)
	if got.Heartbeat.Before(before) || got.Progress.BytesTotal != 100 {
		t.Fatalf("after a heartbeat without progress: heartbeat %v, progress %+v", got.Heartbeat, got.Progress)
	}
	p := catalog.Progress{BytesDone: 40, BytesTotal: 100, BytesPerSecond: 10.5, ETA: 6 * time.Second, ItemsDone: 1, ItemsTotal: 4}
	_, err = c.Heartbeat(ctx, j.ID, &p)
	ok(t, err)
	got, err = other.GetJob(ctx, j.ID)
	ok(t, err)
	same(t, "progress after a heartbeat", got.Progress, p)

	// Another process asks to cancel; the owner's next heartbeat sees it.
	first, err := other.RequestCancel(ctx, j.ID, "cancel requested by bob")
	ok(t, err)
	if first.ID != j.ID || first.CancelRequested.IsZero() || first.Status != catalog.StatusRunning || first.LogLines != 1 {
		t.Fatalf("RequestCancel returned %+v", first)
	}
	again, err := c.RequestCancel(ctx, j.ID, "")
	ok(t, err)
	same(t, "a second request keeps the first's time", again.CancelRequested, first.CancelRequested)
	lines, err := c.JobLog(ctx, j.ID, 0, 0)
	ok(t, err)
	if len(lines) != 1 || lines[0].Seq != 1 || lines[0].Level != "warn" || lines[0].Kind != "cancel" || lines[0].Message != "cancel requested by bob" {
		t.Fatalf("log after the cancel requests: %+v", lines)
	}
	cancelAt, err = c.Heartbeat(ctx, j.ID, nil)
	ok(t, err)
	same(t, "cancel request seen by the owner", cancelAt, first.CancelRequested)

	// Finished, a job takes neither heartbeats nor cancel requests.
	fin := got
	fin.Status, fin.FinishedAt = catalog.StatusCancelled, time.Now()
	ok(t, c.UpdateJob(ctx, &fin))
	_, err = c.Heartbeat(ctx, j.ID, &p)
	wantNotFound(t, "heartbeat of a finished job", err)
	done, err := other.RequestCancel(ctx, j.ID, "too late")
	if !errors.Is(err, catalog.ErrFinished) || done.Status != catalog.StatusCancelled || done.LogLines != 1 {
		t.Fatalf("cancel of a finished job: %+v, %v; want the job and ErrFinished", done, err)
	}
	_, err = c.RequestCancel(ctx, j.ID+1000, "")
	wantNotFound(t, "cancel of a missing job", err)
	_, err = c.Heartbeat(ctx, j.ID+1000, nil)
	wantNotFound(t, "heartbeat of a missing job", err)
}

func testAbandonJob(t *testing.T, open Opener) {
	c, other := mustOpen(t, open), mustOpen(t, open)
	ctx := context.Background()
	j := &catalog.Job{Kind: catalog.KindBackupPolicy, Status: catalog.StatusRunning, Heartbeat: at(0),
		Owner: catalog.Owner{Host: "h", PID: 7}}
	ok(t, c.CreateJob(ctx, j))
	ok(t, c.AddEvents(ctx, []catalog.Event{{JobID: j.ID, Kind: "start"}}))
	// The owner showed a sign of life after the caller looked: not gone.
	_, err := c.Heartbeat(ctx, j.ID, nil)
	ok(t, err)
	done, err := other.AbandonJob(ctx, j.ID, at(0), catalog.StatusFailed, "interrupted")
	ok(t, err)
	if done {
		t.Fatal("a job whose owner beat since it was judged gone was abandoned")
	}
	cur, err := other.GetJob(ctx, j.ID)
	ok(t, err)
	done, err = other.AbandonJob(ctx, j.ID, cur.Heartbeat, catalog.StatusFailed, "interrupted: its process is gone")
	ok(t, err)
	if !done {
		t.Fatal("a job with an unchanged heartbeat was not abandoned")
	}
	got, err := c.GetJob(ctx, j.ID)
	ok(t, err)
	if got.Status != catalog.StatusFailed || got.Error != "interrupted: its process is gone" || got.FinishedAt.IsZero() || got.LogLines != 2 {
		t.Fatalf("abandoned job: %+v", got)
	}
	lines, err := c.JobLog(ctx, j.ID, 1, 0)
	ok(t, err)
	if len(lines) != 1 || lines[0].Seq != 2 || lines[0].Level != "error" || lines[0].Message != got.Error {
		t.Fatalf("log line of the abandonment: %+v", lines)
	}
	// A second process noticing the same does nothing.
	done, err = c.AbandonJob(ctx, j.ID, cur.Heartbeat, catalog.StatusFailed, "again")
	ok(t, err)
	if done {
		t.Fatal("a finished job was abandoned again")
	}
	if _, err := c.AbandonJob(ctx, j.ID, cur.Heartbeat, catalog.StatusRunning, "x"); err == nil {
		t.Fatal("abandoning with a status that is not final was accepted")
	}
	// A job that never beat (NULL) is matched by a zero lastSeen.
	legacy := &catalog.Job{Kind: catalog.KindGC, Status: catalog.StatusQueued}
	ok(t, c.CreateJob(ctx, legacy))
	done, err = c.AbandonJob(ctx, legacy.ID, time.Time{}, catalog.StatusFailed, "interrupted")
	ok(t, err)
	if !done {
		t.Fatal("a job without a heartbeat was not abandoned with a zero lastSeen")
	}
}

func testPruneHistory(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	cut := at(30 * 24 * time.Hour)
	type made struct {
		job   *catalog.Job
		lines int
	}
	mk := func(status catalog.Status, finished time.Time, lines, vms int) made {
		j := &catalog.Job{Kind: catalog.KindBackupPolicy, Status: status, CreatedAt: at(0), FinishedAt: finished}
		ok(t, c.CreateJob(ctx, j))
		var tasks []*catalog.Task
		for i := range vms {
			tasks = append(tasks, &catalog.Task{JobID: j.ID, VMID: fmt.Sprint(i)})
		}
		ok(t, c.CreateTasks(ctx, tasks))
		var es []catalog.Event
		for i := range lines {
			e := catalog.Event{JobID: j.ID, Time: finished, Kind: "line"}
			if len(tasks) > 0 {
				e.TaskID = tasks[i%len(tasks)].ID
			}
			es = append(es, e)
		}
		ok(t, c.AddEvents(ctx, es))
		return made{j, lines}
	}
	old := []made{mk(catalog.StatusSuccess, at(0), 40, 5), mk(catalog.StatusFailed, at(time.Hour), 25, 0), mk(catalog.StatusCancelled, at(2*time.Hour), 0, 3)}
	recent := mk(catalog.StatusSuccess, cut.Add(time.Hour), 10, 2)
	// Unfinished, however old: still running, or to be marked by its owner's successor.
	running := mk(catalog.StatusRunning, time.Time{}, 5, 1)
	ok(t, c.AddEvents(ctx, []catalog.Event{{Time: at(0), Kind: "server-started"}, {Time: cut.Add(time.Minute), Kind: "server-started"}}))

	const limit = 17
	want := 40 + 5 + 25 + 3 + 3 + 1 // events, tasks and jobs of the old jobs, and one old loose event
	deleted := 0
	for round := 0; ; round++ {
		n, err := c.PruneHistory(ctx, cut, limit)
		ok(t, err)
		if n > limit {
			t.Fatalf("one prune deleted %d rows, more than its batch of %d", n, limit)
		}
		if n == 0 {
			break
		}
		deleted += n
		if round > want {
			t.Fatal("pruning does not end")
		}
	}
	same(t, "rows pruned", deleted, want)
	for _, m := range old {
		_, err := c.GetJob(ctx, m.job.ID)
		wantNotFound(t, "an old finished job after pruning", err)
	}
	for _, m := range []made{recent, running} {
		got, err := c.GetJob(ctx, m.job.ID)
		ok(t, err)
		lines, err := c.JobLog(ctx, m.job.ID, 0, 0)
		ok(t, err)
		if len(lines) != m.lines || got.LogLines != int64(m.lines) {
			t.Fatalf("job %d kept %d of %d lines", m.job.ID, len(lines), m.lines)
		}
	}
	tasks, err := c.ListTasks(ctx, catalog.TaskFilter{})
	ok(t, err)
	same(t, "VM tasks left", len(tasks), 3)
	loose, err := c.ListEvents(ctx, catalog.EventFilter{})
	ok(t, err)
	same(t, "events left", len(loose), 10+5+1)
	if _, err := c.PruneHistory(ctx, cut, 0); err == nil {
		t.Fatal("a prune without a batch limit was accepted")
	}
}
