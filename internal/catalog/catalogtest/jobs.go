package catalogtest

import (
	"context"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

func testJobs(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	if _, err := c.GetJob(ctx, 12345); err != nil {
		wantNotFound(t, "GetJob of a missing job", err)
	} else {
		t.Fatal("GetJob of a missing job succeeded")
	}
	j := &catalog.Job{Kind: "backup", Policy: "nightly", Repository: "r1", Status: catalog.StatusQueued,
		Worker: "w1", CreatedAt: base}
	ok(t, c.CreateJob(ctx, j))
	if j.ID <= 0 {
		t.Fatalf("CreateJob set ID %d", j.ID)
	}
	got, err := c.GetJob(ctx, j.ID)
	ok(t, err)
	want := *j
	want.CreatedAt = at(0)
	same(t, "created job", got, want)

	// A zero CreatedAt is stamped with the current time.
	before := time.Now().Add(-time.Second)
	j2 := &catalog.Job{Kind: "gc"}
	ok(t, c.CreateJob(ctx, j2))
	if j2.ID == j.ID || j2.CreatedAt.Before(before) || j2.CreatedAt.After(time.Now().Add(time.Second)) {
		t.Fatalf("second job: ID %d (first %d), CreatedAt %v", j2.ID, j.ID, j2.CreatedAt)
	}
	got2, err := c.GetJob(ctx, j2.ID)
	ok(t, err)
	if !got2.CreatedAt.Equal(j2.CreatedAt) {
		t.Fatalf("stamped CreatedAt: stored %v, returned %v", got2.CreatedAt, j2.CreatedAt)
	}

	// Update rewrites every field.
	want = catalog.Job{ID: j.ID, Kind: "backup", Policy: "nightly", Repository: "r1", Status: catalog.StatusPartial,
		Worker: "w2", CreatedAt: at(0), StartedAt: at(time.Second), FinishedAt: at(time.Hour), TasksTotal: 10,
		TasksOK: 8, TasksFail: 2, Error: "2 of 10 VMs failed"}
	upd := want
	ok(t, c.UpdateJob(ctx, &upd))
	got, err = c.GetJob(ctx, j.ID)
	ok(t, err)
	same(t, "updated job", got, want)
	if !got.Status.Done() {
		t.Fatal("partial is a terminal status")
	}

	wantNotFound(t, "UpdateJob of a missing job", c.UpdateJob(ctx, &catalog.Job{ID: j2.ID + 1000, Kind: "x"}))
}

func testJobFilters(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	var all []*catalog.Job
	for i := range 10 {
		j := &catalog.Job{Kind: "backup", Policy: []string{"a", "b"}[i%2], Status: catalog.StatusSuccess,
			CreatedAt: base.Add(time.Duration(i) * time.Minute)}
		if i%3 == 0 {
			j.Status = catalog.StatusFailed
		}
		ok(t, c.CreateJob(ctx, j))
		all = append(all, j)
	}
	// Two jobs at the same instant: the later ID comes first.
	tie := &catalog.Job{Kind: "backup", Policy: "b", Status: catalog.StatusSuccess, CreatedAt: all[9].CreatedAt}
	ok(t, c.CreateJob(ctx, tie))

	list := func(f catalog.JobFilter) []int64 {
		t.Helper()
		jobs, err := c.ListJobs(ctx, f)
		ok(t, err)
		return ids(jobs, jobID)
	}
	want := []int64{tie.ID}
	for i := 9; i >= 0; i-- {
		want = append(want, all[i].ID)
	}
	same(t, "all jobs, newest first", list(catalog.JobFilter{}), want)
	same(t, "limit 3", list(catalog.JobFilter{Limit: 3}), want[:3])
	same(t, "policy a", list(catalog.JobFilter{Policy: "a"}), []int64{all[8].ID, all[6].ID, all[4].ID, all[2].ID, all[0].ID})
	same(t, "failed", list(catalog.JobFilter{Status: catalog.StatusFailed}), []int64{all[9].ID, all[6].ID, all[3].ID, all[0].ID})
	same(t, "since (inclusive)", list(catalog.JobFilter{Since: all[8].CreatedAt}), []int64{tie.ID, all[9].ID, all[8].ID})
	same(t, "combined", list(catalog.JobFilter{Policy: "b", Status: catalog.StatusSuccess, Since: all[4].CreatedAt, Limit: 2}),
		[]int64{tie.ID, all[7].ID})
	same(t, "no match", list(catalog.JobFilter{Policy: "none"}), []int64{})
	// Pages of two after a cursor, through the tie.
	var paged []int64
	var after catalog.JobCursor
	for {
		jobs, err := c.ListJobs(ctx, catalog.JobFilter{After: after, Limit: 2})
		ok(t, err)
		if len(jobs) == 0 {
			break
		}
		paged = append(paged, ids(jobs, jobID)...)
		after = jobs[len(jobs)-1].Cursor()
	}
	same(t, "pages after cursors", paged, want)
}

func testTasks(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	j1, j2 := &catalog.Job{Kind: "backup"}, &catalog.Job{Kind: "backup"}
	ok(t, c.CreateJob(ctx, j1))
	ok(t, c.CreateJob(ctx, j2))
	ok(t, c.CreateTasks(ctx, nil))
	full := &catalog.Task{JobID: j1.ID, Connection: "qemu-1", VMID: "vm-1", VMName: "web", Host: "h1",
		Datastores: []string{"ds1", "ds2"}, Status: catalog.StatusRunning, Mode: "incremental",
		SnapshotMode: "quiesced", Attempts: 2, StartedAt: at(time.Second), FinishedAt: at(time.Minute),
		BytesLogical: 10 << 30, BytesRead: 1 << 30, BytesStored: 123456789, BackupPointID: "abcd",
		Warnings: []string{"quiesce failed, fell back to crash-consistent", "ünïcode ✓"}, Error: "",
		SnapshotModeAchieved: "crash-consistent"}
	tasks := []*catalog.Task{full,
		{JobID: j1.ID, VMID: "vm-2", VMName: "db", Status: catalog.StatusQueued},
		{JobID: j2.ID, VMID: "vm-1", VMName: "web", Status: catalog.StatusFailed, Error: "timeout"},
	}
	ok(t, c.CreateTasks(ctx, tasks))
	seen := map[int64]bool{}
	for _, x := range tasks {
		if x.ID <= 0 || seen[x.ID] {
			t.Fatalf("CreateTasks set IDs %v", ids(derefTasks(tasks), taskID))
		}
		seen[x.ID] = true
	}
	got, err := c.GetTask(ctx, full.ID)
	ok(t, err)
	same(t, "task round trip", got, *full)
	got, err = c.GetTask(ctx, tasks[1].ID)
	ok(t, err)
	same(t, "sparse task round trip", got, *tasks[1])
	if got.Datastores != nil || got.Warnings != nil {
		t.Fatal("empty JSON lists must read back nil")
	}
	_, err = c.GetTask(ctx, tasks[2].ID+1000)
	wantNotFound(t, "GetTask of a missing task", err)

	// Update two tasks, given in reverse ID order.
	u1, u2 := *tasks[2], *full
	u1.Status, u1.Attempts, u1.Warnings, u1.SnapshotModeAchieved = catalog.StatusSuccess, 3, []string{"retried"}, "suspend"
	u2.Status, u2.Datastores, u2.Warnings, u2.BytesStored = catalog.StatusSuccess, []string{"ds3"}, nil, 42
	ok(t, c.UpdateTasks(ctx, []*catalog.Task{&u1, &u2}))
	got, err = c.GetTask(ctx, full.ID)
	ok(t, err)
	same(t, "updated task", got, u2)
	got, err = c.GetTask(ctx, u1.ID)
	ok(t, err)
	same(t, "updated task 2", got, u1)

	list := func(f catalog.TaskFilter) []int64 {
		t.Helper()
		ts, err := c.ListTasks(ctx, f)
		ok(t, err)
		return ids(ts, taskID)
	}
	same(t, "all tasks in creation order", list(catalog.TaskFilter{}), []int64{full.ID, tasks[1].ID, tasks[2].ID})
	same(t, "tasks of job 1", list(catalog.TaskFilter{JobID: j1.ID}), []int64{full.ID, tasks[1].ID})
	same(t, "tasks of vm-1", list(catalog.TaskFilter{VMID: "vm-1"}), []int64{full.ID, tasks[2].ID})
	same(t, "successful", list(catalog.TaskFilter{Status: catalog.StatusSuccess}), []int64{full.ID, tasks[2].ID})
	same(t, "limit", list(catalog.TaskFilter{Limit: 1}), []int64{full.ID})
	same(t, "the page after the first", list(catalog.TaskFilter{AfterID: full.ID, Limit: 1}), []int64{tasks[1].ID})
	same(t, "a job's tasks after one", list(catalog.TaskFilter{JobID: j1.ID, AfterID: full.ID}), []int64{tasks[1].ID})
	same(t, "combined", list(catalog.TaskFilter{JobID: j2.ID, VMID: "vm-1", Status: catalog.StatusSuccess}), []int64{tasks[2].ID})
}

func derefTasks(ts []*catalog.Task) []catalog.Task {
	out := make([]catalog.Task, len(ts))
	for i, x := range ts {
		out[i] = *x
	}
	return out
}

func testTaskUpdatesAtomic(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	j := &catalog.Job{Kind: "backup"}
	ok(t, c.CreateJob(ctx, j))
	a := &catalog.Task{JobID: j.ID, VMID: "a", Status: catalog.StatusQueued}
	ok(t, c.CreateTasks(ctx, []*catalog.Task{a}))
	changed := *a
	changed.Status = catalog.StatusRunning
	missing := &catalog.Task{ID: a.ID + 1000, JobID: j.ID, VMID: "ghost"}
	wantNotFound(t, "UpdateTasks with a missing task", c.UpdateTasks(ctx, []*catalog.Task{&changed, missing}))
	got, err := c.GetTask(ctx, a.ID)
	ok(t, err)
	same(t, "task after a failed batch update", got, *a)
}

func testMissingReferences(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	j := &catalog.Job{Kind: "backup"}
	ok(t, c.CreateJob(ctx, j))
	good := &catalog.Task{JobID: j.ID, VMID: "ok"}
	bad := &catalog.Task{JobID: j.ID + 1000, VMID: "orphan"}
	wantNotFound(t, "CreateTasks for a missing job", c.CreateTasks(ctx, []*catalog.Task{good, bad}))
	tasks, err := c.ListTasks(ctx, catalog.TaskFilter{})
	ok(t, err)
	if len(tasks) != 0 {
		t.Fatalf("a failed CreateTasks left %d task(s): not one transaction", len(tasks))
	}
	err = c.AddEvents(ctx, []catalog.Event{{JobID: j.ID, Kind: "ok"}, {JobID: j.ID, TaskID: 999999, Kind: "orphan"}})
	wantNotFound(t, "AddEvents for a missing task", err)
	err = c.AddEvents(ctx, []catalog.Event{{JobID: j.ID, Kind: "ok"}, {JobID: j.ID + 1000, Kind: "orphan"}})
	wantNotFound(t, "AddEvents for a missing job", err)
	wantNotFound(t, "AddEvents for a missing job alone", c.AddEvents(ctx, []catalog.Event{{JobID: j.ID + 1000, Kind: "orphan"}}))
	wantNotFound(t, "AddEvents for a missing task alone", c.AddEvents(ctx, []catalog.Event{{JobID: j.ID, TaskID: 999999, Kind: "orphan"}}))
	events, err := c.ListEvents(ctx, catalog.EventFilter{})
	ok(t, err)
	if len(events) != 0 {
		t.Fatalf("a failed AddEvents left %d event(s): not one transaction", len(events))
	}
	got, err := c.GetJob(ctx, j.ID)
	ok(t, err)
	if got.LogLines != 0 {
		t.Fatalf("failed AddEvents left the job's log at %d lines: not one transaction", got.LogLines)
	}
}
