package catalogtest

import (
	"context"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// testSupersedeTask: a run that carries on another settles that run's
// task of each VM: one not ended is cancelled with the message, one that
// ended keeps its state, and the point of one that succeeded is returned;
// another job's task of the same VM, and another VM's, are untouched.
func testSupersedeTask(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	old := &catalog.Job{Kind: catalog.KindBackupPolicy, Status: catalog.StatusFailed}
	other := &catalog.Job{Kind: catalog.KindBackupPolicy, Status: catalog.StatusRunning}
	ok(t, c.CreateJob(ctx, old))
	ok(t, c.CreateJob(ctx, other))
	task := func(j *catalog.Job, vm string, s catalog.Status, point string) *catalog.Task {
		return &catalog.Task{JobID: j.ID, Connection: "east", VMID: vm, VMName: vm, Status: s, BackupPointID: point}
	}
	tasks := []*catalog.Task{task(old, "done", catalog.StatusSuccess, "p1"), task(old, "running", catalog.StatusRunning, ""),
		task(old, "queued", catalog.StatusQueued, ""), task(old, "failed", catalog.StatusFailed, ""),
		task(other, "running", catalog.StatusRunning, "")}
	ok(t, c.CreateTasks(ctx, tasks))
	want := map[int64]catalog.Status{}
	for _, vm := range []string{"done", "running", "queued", "failed", "never"} {
		p, err := c.SupersedeTask(ctx, old.ID, "east", vm, "interrupted: job 9 carries the run on")
		ok(t, err)
		if (vm == "done") != (p == "p1") || (vm != "done" && p != "") {
			t.Errorf("SupersedeTask of %s: point %q", vm, p)
		}
	}
	for i, s := range []catalog.Status{catalog.StatusSuccess, catalog.StatusCancelled, catalog.StatusCancelled, catalog.StatusFailed,
		catalog.StatusRunning} {
		want[tasks[i].ID] = s
	}
	for _, tk := range tasks {
		got, err := c.GetTask(ctx, tk.ID)
		ok(t, err)
		settled := want[tk.ID] == catalog.StatusCancelled
		if got.Status != want[tk.ID] || settled != (got.Error == "interrupted: job 9 carries the run on") || settled == got.FinishedAt.IsZero() {
			t.Errorf("task of %s in job %d after the settlement: %s (%q, finished %v), want %s", got.VMID, got.JobID, got.Status,
				got.Error, got.FinishedAt, want[tk.ID])
		}
	}
}
