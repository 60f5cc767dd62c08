package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/hypervisor/fake"
)

// A run that resumes an interrupted one takes the point of a VM whose
// task there succeeded after the resumed run listed its VMs (a held
// unit's commit) and does not back it up again; the interrupted run's
// tasks not ended are ended (cancelled: their units can commit nothing
// more), and their VMs are backed up; a VM the interrupted run never had
// is backed up too.
func TestResumedRunTakesThePointsItsPredecessorCommitted(t *testing.T) {
	e := newEnv(t, fake.Options{Seed: 43, VMs: 4, Hosts: 1, Datastores: 1, DiskSize: 64 << 10}, nil, nil)
	ctx := context.Background()
	vms, err := e.fake.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := &catalog.Job{Kind: catalog.KindBackupPolicy, Policy: "resumed", Status: catalog.StatusFailed, Error: "interrupted: gone"}
	if err := e.cat.CreateJob(ctx, old); err != nil {
		t.Fatal(err)
	}
	// vms[0]: its unit committed after the resume listed the VMs;
	// vms[1]: its unit still ran; vms[2]: queued; vms[3]: none.
	statuses := []catalog.Status{catalog.StatusSuccess, catalog.StatusRunning, catalog.StatusQueued}
	var olds []*catalog.Task
	for i, s := range statuses {
		task := &catalog.Task{JobID: old.ID, Connection: "lab", VMID: vms[i].ID, VMName: vms[i].Name, Status: s}
		if s == catalog.StatusSuccess {
			task.BackupPointID = "committed-by-the-held-unit"
		}
		olds = append(olds, task)
	}
	if err := e.cat.CreateTasks(ctx, olds); err != nil {
		t.Fatal(err)
	}

	j, err := e.eng.StartResuming(ctx, testPolicy("resumed"), old.ID)
	if err != nil {
		t.Fatal(err)
	}
	res, err := j.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.Job.Status != catalog.StatusSuccess || res.Job.TasksOK != 4 || len(res.Tasks) != 4 {
		t.Fatalf("the resumed run: %s (%s), %d of %d tasks ok", res.Job.Status, res.Job.Error, res.Job.TasksOK, len(res.Tasks))
	}
	points, err := e.cat.ListBackupPoints(ctx, catalog.BackupPointFilter{})
	if err != nil {
		t.Fatal(err)
	}
	pointOf := map[string]string{}
	for _, p := range points {
		pointOf[p.VMID] = p.ID
	}
	for _, task := range res.Tasks {
		adopted := task.VMID == vms[0].ID
		switch {
		case adopted && (task.BackupPointID != "committed-by-the-held-unit" || task.Attempts != 0 || pointOf[task.VMID] != ""):
			t.Errorf("%s, whose held unit committed: point %q after %d attempts, catalog point %q: want the held unit's, none made",
				task.VMName, task.BackupPointID, task.Attempts, pointOf[task.VMID])
		case !adopted && (task.BackupPointID == "" || pointOf[task.VMID] != task.BackupPointID):
			t.Errorf("%s: point %q, catalog point %q: want it backed up by the resumed run", task.VMName, task.BackupPointID, pointOf[task.VMID])
		}
	}
	for i, want := range []catalog.Status{catalog.StatusSuccess, catalog.StatusCancelled, catalog.StatusCancelled} {
		got, err := e.cat.GetTask(ctx, olds[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != want || (want == catalog.StatusCancelled && !strings.Contains(got.Error, "carries the run on")) {
			t.Errorf("the interrupted run's task of %s: %s (%s), want %s", got.VMName, got.Status, got.Error, want)
		}
	}
	e.noLeaks()
}
