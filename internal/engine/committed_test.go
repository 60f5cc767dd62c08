package engine

import (
	"context"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/hypervisor/fake"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
)

// committingRunner is a hand-off that records what a worker does on
// PostgreSQL: the task's start with the grant, the task's end and the
// point with the completion (here, in the engine's catalog), then says
// so (Placement.Committed). Its writes carry a mark the engine's do not.
type committingRunner struct{ cat catalog.Catalog }

var workersEnd = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)

func (r committingRunner) RecordsStart(p Placement) bool { return p.Worker != "" }

func (r committingRunner) RunAttempt(ctx context.Context, p Placement, local func(context.Context) (*repo.Point, error)) (*repo.Point, error) {
	start := &catalog.Task{ID: p.TaskID, JobID: p.JobID, Connection: p.Connection, VMID: p.VMID, VMName: p.VM,
		Status: catalog.StatusRunning, Attempts: p.Attempt, StartedAt: p.Started, Mode: p.Mode, SnapshotMode: p.SnapshotMode}
	if err := r.cat.UpdateTasks(ctx, []*catalog.Task{start}); err != nil {
		return nil, err
	}
	snap, err := local(ctx)
	if err != nil {
		return nil, err
	}
	end := *start
	end.Status, end.FinishedAt, end.BackupPointID = catalog.StatusSuccess, workersEnd, snap.ID.String()
	if err := r.cat.UpdateTasks(ctx, []*catalog.Task{&end}); err != nil {
		return nil, err
	}
	pt := catalog.BackupPoint{Repository: "by-the-worker", ID: snap.ID.String(), Time: snap.Time, Connection: p.Connection,
		VMID: p.VMID, VMName: p.VM, Mode: snap.Mode, JobID: p.JobID}
	if err := r.cat.PutBackupPoints(ctx, []catalog.BackupPoint{pt}); err != nil {
		return nil, err
	}
	p.Committed()
	return snap, nil
}

// An attempt whose runner committed its point and its task's end (a
// worker's completion) is not recorded again by the engine: no point of
// its own, no task write over the worker's, even with batched writes
// flushed every millisecond while units start and end; the job's own
// record still counts every VM backed up.
func TestCommittedAttemptsAreNotRecordedAgain(t *testing.T) {
	var r committingRunner
	e := newEnv(t, fake.Options{Seed: 41, VMs: 24, Hosts: 2, Datastores: 2, DiskSize: 64 << 10}, &policy.Config{Limits: policy.Limits{Tasks: 4}},
		func(o *Options) {
			r.cat = o.Catalog
			o.UnitRunner, o.FlushInterval = r, time.Millisecond
			o.Config.Connections[len(o.Config.Connections)-1].Kind = "vsphere"
		})
	if err := e.eng.SetWorkers([]Worker{{Name: "w1", Slots: 2, Reach: Reach{Connections: []string{"lab"}}},
		{Name: "w2", Slots: 2, Reach: Reach{Connections: []string{"lab"}}}}); err != nil {
		t.Fatal(err)
	}
	res := e.run(testPolicy("committed"))
	if res.Job.Status != catalog.StatusSuccess || len(res.Tasks) != 24 {
		t.Fatalf("job %s (%s), %d tasks", res.Job.Status, res.Job.Error, len(res.Tasks))
	}
	ctx := context.Background()
	tasks, err := e.cat.ListTasks(ctx, catalog.TaskFilter{JobID: res.Job.ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		if task.Status != catalog.StatusSuccess || !task.FinishedAt.Equal(workersEnd) || task.BackupPointID == "" {
			t.Errorf("task %d (%s) after the run: %s, finished %v, point %q: not the worker's end", task.ID, task.VMName,
				task.Status, task.FinishedAt, task.BackupPointID)
		}
	}
	points, err := e.cat.ListBackupPoints(ctx, catalog.BackupPointFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(points) != 24 {
		t.Errorf("%d points in the catalog, want the workers' 24", len(points))
	}
	for _, p := range points {
		if p.Repository != "by-the-worker" {
			t.Errorf("point %s of %s recorded by the engine too (repository %s)", p.ID, p.VMName, p.Repository)
		}
	}
	e.noLeaks()
}
