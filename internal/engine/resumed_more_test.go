package engine

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/fake"
)

// interruptedRun records a dead leader's job of kind with one task per
// status, of vms in order; a successful one names point.
func interruptedRun(t *testing.T, e *env, kind string, vms []hypervisor.VM, point string, statuses ...catalog.Status) (*catalog.Job, []*catalog.Task) {
	t.Helper()
	ctx := context.Background()
	old := &catalog.Job{Kind: kind, Policy: "resumed", Status: catalog.StatusFailed, Error: "interrupted: gone"}
	if err := e.cat.CreateJob(ctx, old); err != nil {
		t.Fatal(err)
	}
	var olds []*catalog.Task
	for i, s := range statuses {
		task := &catalog.Task{JobID: old.ID, Connection: "lab", VMID: vms[i].ID, VMName: vms[i].Name, Status: s}
		if s == catalog.StatusSuccess {
			task.BackupPointID = point
		}
		olds = append(olds, task)
	}
	if err := e.cat.CreateTasks(ctx, olds); err != nil {
		t.Fatal(err)
	}
	return old, olds
}

// A resumed run of a group: datastore policy settles the interrupted
// run's task of every VM of a batch before the batch's first snapshot: a
// VM whose unit committed takes that point and leaves the batch, the
// tasks not ended are cancelled before the batch runs (so their units
// commit nothing beside it), and the batch reads the others. Both where
// batches run: in this process, and handed whole to a worker.
func TestResumedBatchSettlesItsVMsFirst(t *testing.T) {
	for _, onWorker := range []bool{false, true} {
		t.Run(map[bool]string{false: "in-process", true: "on-a-worker"}[onWorker], func(t *testing.T) {
			br := &batchRunner{recordingRunner: newRecordingRunner()}
			var mod func(*Options)
			if onWorker {
				mod = func(o *Options) { o.UnitRunner = br }
			}
			e := newEnv(t, fake.Options{Seed: 43, VMs: 4, Hosts: 1, Datastores: 1, DiskSize: 64 << 10}, nil, mod)
			ctx := context.Background()
			vms, err := e.fake.Inventory(ctx)
			if err != nil {
				t.Fatal(err)
			}
			old, olds := interruptedRun(t, e, catalog.KindBackupPolicy, vms, "committed-by-the-held-unit",
				catalog.StatusSuccess, catalog.StatusRunning, catalog.StatusQueued)
			var mu sync.Mutex
			var batched []string
			var unsettled []string
			br.run = func(ctx context.Context, b BatchPlacement) ([]BatchOutcome, error) {
				mu.Lock()
				defer mu.Unlock()
				for _, vm := range b.VMs {
					batched = append(batched, vm.VM)
				}
				for _, o := range olds[1:] {
					if got, _ := e.cat.GetTask(ctx, o.ID); got.Status != catalog.StatusCancelled {
						unsettled = append(unsettled, got.VMName)
					}
				}
				return pointsFor(b, nil), nil
			}
			if onWorker {
				if err := e.eng.SetWorkers([]Worker{{Name: "w1", Slots: 4, Reach: Reach{Connections: []string{"lab"}, Datastores: []string{"lab/ds-001"}}}}); err != nil {
					t.Fatal(err)
				}
			}
			p := testPolicy("resumed")
			p.Group = "datastore"
			j, err := e.eng.StartResuming(ctx, p, old.ID)
			if err != nil {
				t.Fatal(err)
			}
			res, err := j.Wait()
			if err != nil {
				t.Fatal(err)
			}
			if res.Job.Status != catalog.StatusSuccess || res.Job.TasksOK != 4 {
				t.Fatalf("the resumed run: %s (%s), %d of %d tasks ok", res.Job.Status, res.Job.Error, res.Job.TasksOK, len(res.Tasks))
			}
			for _, task := range res.Tasks {
				adopted := task.VMID == vms[0].ID
				if adopted != (task.BackupPointID == "committed-by-the-held-unit") || adopted != (task.Attempts == 0) || task.BackupPointID == "" {
					t.Errorf("%s: point %q after %d attempts (adopted: %v)", task.VMName, task.BackupPointID, task.Attempts, adopted)
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
			if !onWorker {
				e.noLeaks()
				return
			}
			slices.Sort(batched)
			want := []string{vms[1].Name, vms[2].Name, vms[3].Name}
			slices.Sort(want)
			if !slices.Equal(batched, want) || len(unsettled) > 0 {
				t.Errorf("the worker's batch read %v, want %v (the adopted VM left out); tasks not settled when it ran: %v", batched, want, unsettled)
			}
		})
	}
}

// A backup of one VM forwarded again after its leader died (Resumes)
// takes the point its lost job's unit committed, and answers with it
// (Job.Point), backing nothing up again; a lost job whose task had not
// ended is settled (cancelled) and the VM backed up.
func TestVMBackupResumingALostJob(t *testing.T) {
	e := newEnv(t, fake.Options{Seed: 44, VMs: 2, Hosts: 1, Datastores: 1, DiskSize: 64 << 10}, nil, nil)
	ctx := context.Background()
	vms, err := e.fake.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first, err := e.eng.StartVM(ctx, adHoc(vms[0], "full")) // the lost leader's unit, which committed
	if err != nil {
		t.Fatal(err)
	}
	committed, _, err := first.Point()
	if err != nil {
		t.Fatal(err)
	}
	done, _ := interruptedRun(t, e, catalog.KindBackupVM, vms[:1], committed.ID.String(), catalog.StatusSuccess)
	running, runningTasks := interruptedRun(t, e, catalog.KindBackupVM, vms[1:], "", catalog.StatusRunning)

	var started int64
	b := adHoc(vms[0], "incremental")
	b.Resumes, b.Started = []int64{running.ID, done.ID}, func(id int64) { started = id }
	j, err := e.eng.StartVM(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := j.Point()
	if err != nil || p.ID != committed.ID || started != j.ID() {
		t.Fatalf("the backup resuming job %d: point %v (%v), started %d of job %d; want point %s", done.ID, p, err, started, j.ID(), committed.ID)
	}
	pts, err := e.cat.ListBackupPoints(ctx, catalog.BackupPointFilter{VMID: vms[0].ID})
	if err != nil || len(pts) != 1 {
		t.Fatalf("%s has %d points in the catalog (%v), want the committed one only", vms[0].Name, len(pts), err)
	}

	b = adHoc(vms[1], "full")
	b.Resumes = []int64{running.ID}
	if j, err = e.eng.StartVM(ctx, b); err != nil {
		t.Fatal(err)
	}
	if p, _, err = j.Point(); err != nil || p == nil {
		t.Fatalf("the backup of %s resuming job %d: %v", vms[1].Name, running.ID, err)
	}
	got, err := e.cat.GetTask(ctx, runningTasks[0].ID)
	if err != nil || got.Status != catalog.StatusCancelled {
		t.Errorf("the lost job's running task of %s: %s (%v), want cancelled", vms[1].Name, got.Status, err)
	}
	e.noLeaks()
}
