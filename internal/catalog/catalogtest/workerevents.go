package catalogtest

import (
	"context"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// testWorkerEvents: a worker's events land in the job's log while it is
// registered with the epoch it names and not lost, and are refused
// (ErrFenced, nothing written) once it registered again or was declared
// lost, or for a name never registered.
func testWorkerEvents(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	j := &catalog.Job{Kind: catalog.KindVerify}
	ok(t, c.CreateJob(ctx, j))
	line := func(msg string) []catalog.Event {
		return []catalog.Event{{JobID: j.ID, Level: "info", Kind: "worker", Message: msg}}
	}
	logged := func() []string {
		t.Helper()
		es, err := c.JobLog(ctx, j.ID, 0, 100)
		ok(t, err)
		out := make([]string, len(es))
		for i, e := range es {
			out[i] = e.Message
		}
		return out
	}
	_, err := c.RegisterWorker(ctx, catalog.Worker{Name: "kvm1", Protocol: 1, Slots: 1}, at(0))
	ok(t, err)
	ev := line("epoch 1 runs")
	ok(t, c.AddWorkerEvents(ctx, "kvm1", 1, ev))
	if ev[0].Seq != 1 {
		t.Fatalf("the event's line number is %d, want 1", ev[0].Seq)
	}
	_, err = c.RegisterWorker(ctx, catalog.Worker{Name: "kvm1", Protocol: 1, Slots: 1}, at(time.Second))
	ok(t, err)
	wantFenced(t, "an event of the registration before", c.AddWorkerEvents(ctx, "kvm1", 1, line("epoch 1, replaced")))
	wantFenced(t, "an event of a worker never registered", c.AddWorkerEvents(ctx, "nobody", 1, line("nobody")))
	ok(t, c.AddWorkerEvents(ctx, "kvm1", 2, line("epoch 2 runs")))
	two := append(line("epoch 2, a"), line("epoch 2, b")...)
	two[1].Fields = map[string]any{"n": 2.0}
	ok(t, c.AddWorkerEvents(ctx, "kvm1", 2, two))
	if two[0].Seq != 3 || two[1].Seq != 4 {
		t.Fatalf("the two events' line numbers are %d and %d, want 3 and 4", two[0].Seq, two[1].Seq)
	}
	lost, err := c.DeclareWorkersLost(ctx, at(time.Minute))
	ok(t, err)
	if len(lost) != 1 {
		t.Fatalf("declared lost %+v, want kvm1", lost)
	}
	wantFenced(t, "an event of a lost worker", c.AddWorkerEvents(ctx, "kvm1", 2, line("epoch 2, lost")))
	same(t, "the job's log", logged(), []string{"epoch 1 runs", "epoch 2 runs", "epoch 2, a", "epoch 2, b"})
	es, err := c.JobLog(ctx, j.ID, 0, 100)
	ok(t, err)
	same(t, "the second line's fields", es[3].Fields, map[string]any{"n": 2.0})
	ok(t, c.AddWorkerEvents(ctx, "kvm1", 2, nil)) // nothing to write: no check either
}

// testWorkerTaskProgress: a worker records a running task's bytes while
// it is registered with the epoch it names; a task that ended keeps the
// end recorded, and a replaced worker's sample is refused.
func testWorkerTaskProgress(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	j := &catalog.Job{Kind: catalog.KindBackupPolicy, Policy: "p"}
	ok(t, c.CreateJob(ctx, j))
	tk := &catalog.Task{JobID: j.ID, Connection: "c", VMID: "v1", VMName: "v1", Status: catalog.StatusRunning}
	ok(t, c.CreateTasks(ctx, []*catalog.Task{tk}))
	_, err := c.RegisterWorker(ctx, catalog.Worker{Name: "kvm1", Protocol: 1, Slots: 1}, at(0))
	ok(t, err)
	bytes := func() [3]int64 {
		t.Helper()
		got, err := c.GetTask(ctx, tk.ID)
		ok(t, err)
		return [3]int64{got.BytesLogical, got.BytesRead, got.BytesStored}
	}
	ok(t, c.SetWorkerTaskProgress(ctx, "kvm1", 1, tk.ID, 160, 100, 40))
	same(t, "the running task's bytes", bytes(), [3]int64{160, 100, 40})
	_, err = c.RegisterWorker(ctx, catalog.Worker{Name: "kvm1", Protocol: 1, Slots: 1}, at(time.Second))
	ok(t, err)
	wantFenced(t, "progress of the registration before", c.SetWorkerTaskProgress(ctx, "kvm1", 1, tk.ID, 320, 200, 80))
	same(t, "the bytes after a refused sample", bytes(), [3]int64{160, 100, 40})
	tk.Status, tk.BytesLogical, tk.BytesRead, tk.BytesStored = catalog.StatusSuccess, 400, 300, 90
	ok(t, c.UpdateTasks(ctx, []*catalog.Task{tk}))
	ok(t, c.SetWorkerTaskProgress(ctx, "kvm1", 2, tk.ID, 380, 250, 85))
	same(t, "the ended task's bytes after a late sample", bytes(), [3]int64{400, 300, 90})
}
