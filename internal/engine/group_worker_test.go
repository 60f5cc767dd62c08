package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/fake"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
)

// batchRunner hands batches off as a fleet does, recording each; run
// decides each batch's outcome. VM by VM attempts run in this process.
type batchRunner struct {
	*recordingRunner
	mu      sync.Mutex
	batches []BatchPlacement
	run     func(ctx context.Context, b BatchPlacement) ([]BatchOutcome, error)
}

func (r *batchRunner) RunBatch(ctx context.Context, b BatchPlacement) ([]BatchOutcome, error) {
	r.mu.Lock()
	r.batches = append(r.batches, b)
	r.mu.Unlock()
	return r.run(ctx, b)
}

// pointsFor is a batch's outcome with a point for every VM but those
// failed names, which fail with err.
func pointsFor(b BatchPlacement, failed map[string]error) []BatchOutcome {
	var out []BatchOutcome
	for _, vm := range b.VMs {
		if err := failed[vm.VM]; err != nil {
			out = append(out, BatchOutcome{TaskID: vm.TaskID, Err: err})
			continue
		}
		out = append(out, BatchOutcome{TaskID: vm.TaskID, Point: &repo.Point{ID: id.Random(), Time: time.Now(), Mode: vm.Mode}})
	}
	return out
}

// Given workers, a group: datastore batch runs whole on a worker that
// mounts its datastore, with its repository streams; each VM ends as the
// batch's outcome says: a point, or a transient error retried VM by VM.
// A batch whose worker is lost runs again as a batch on another worker
// that mounts the datastore, its VMs' attempts counted.
func TestBatchesRunOnTheirDatastoresWorker(t *testing.T) {
	br := &batchRunner{recordingRunner: newRecordingRunner()}
	e := newEnv(t, fake.Options{Seed: 21, VMs: 10, Hosts: 2, Datastores: 2, DiskSize: 64 << 10},
		&policy.Config{Limits: policy.Limits{PerRepository: 3}}, func(o *Options) { o.UnitRunner = br })
	vms, _ := e.fake.Inventory(context.Background())
	dsOf := map[string]string{}
	for _, vm := range vms {
		dsOf[vm.Name] = vm.Datastores[0]
	}
	bad := vms[0].Name // its read fails once, transiently
	lostOnce := make(chan string, 1)
	br.run = func(ctx context.Context, b BatchPlacement) ([]BatchOutcome, error) {
		if b.Worker == "w1" {
			lostOnce <- b.Datastore // w1 stops answering mid-batch
			<-ctx.Done()
			return nil, context.Cause(ctx)
		}
		return pointsFor(b, map[string]error{bad: fmt.Errorf("%w: read failed", hypervisor.ErrTransient)}), nil
	}
	ws := []Worker{
		{Name: "w1", Slots: 2, Reach: Reach{Connections: []string{"lab"}, Datastores: []string{"lab/ds-001"}}},
		{Name: "w2", Slots: 2, Reach: Reach{Connections: []string{"lab"}, Datastores: []string{"lab/ds-001", "lab/ds-002"}}},
	}
	if err := e.eng.SetWorkers(ws); err != nil {
		t.Fatal(err)
	}
	p := testPolicy("ds")
	p.Group = "datastore"
	job, err := e.eng.Start(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	lostDS := <-lostOnce
	if n := e.eng.WorkerLost("w1"); n != 1 {
		t.Fatalf("%d units cancelled on w1, want its batch", n)
	}
	res, err := job.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.Job.Status != catalog.StatusSuccess || res.Job.TasksOK != len(vms) {
		t.Fatalf("job %s (%s), %d of %d VMs", res.Job.Status, res.Job.Error, res.Job.TasksOK, len(vms))
	}
	for _, tk := range res.Tasks {
		want := 1
		if dsOf[tk.VMName] == lostDS {
			want++ // the lost batch's attempt
		}
		if tk.VMName == bad {
			want++ // its VM by VM retry
		}
		if tk.Attempts != want || tk.BackupPointID == "" {
			t.Errorf("%s on %s: %d attempts, point %q; want %d attempts and a point", tk.VMName, dsOf[tk.VMName], tk.Attempts, tk.BackupPointID, want)
		}
	}
	if on := datastoresOf(res.Tasks); on["ds-001"] == 0 || on["ds-002"] == 0 || len(br.batches) != 3 {
		t.Fatalf("VMs by datastore %v in %d batches: the test needs both datastores, one batch lost", on, len(br.batches))
	}
	for _, b := range br.batches {
		if b.Reads != min(len(b.VMs), 3) || b.Policy != "ds" || len(b.Pools) == 0 {
			t.Errorf("batch of %s on %s: %d reads for %d VMs (3 streams), policy %q, pools %v", b.Datastore, b.Worker, b.Reads, len(b.VMs), b.Policy, b.Pools)
		}
		for _, vm := range b.VMs {
			if dsOf[vm.VM] != b.Datastore || vm.TaskID == 0 || vm.Attempt == 0 {
				t.Errorf("batch of %s holds %s (on %s, task %d, attempt %d)", b.Datastore, vm.VM, dsOf[vm.VM], vm.TaskID, vm.Attempt)
			}
		}
	}
	if runs := br.attempts(); len(runs) != 1 || runs[0].vm != bad || runs[0].worker != "w2" {
		t.Errorf("VM by VM attempts %+v, want %s's retry on w2", runs, bad)
	}
	if n := len(e.cat.EventsOf(res.Job.ID, "retry")); n != 2 {
		t.Errorf("%d retry events, want the lost batch's and %s's", n, bad)
	}
	e.noLeaks()
}

// A worker's outcome that the datastore cannot be snapshotted
// (storage-fallback: vm) backs its VMs up one by one, the batch's attempt
// not counted; a batch whose hand-off fails for good fails its VMs.
func TestBatchOnAWorkerFallsBackOrFails(t *testing.T) {
	br := &batchRunner{recordingRunner: newRecordingRunner()}
	e := newEnv(t, fake.Options{Seed: 22, VMs: 6, Hosts: 1, Datastores: 2, DiskSize: 64 << 10}, nil,
		func(o *Options) { o.UnitRunner = br })
	br.run = func(_ context.Context, b BatchPlacement) ([]BatchOutcome, error) {
		if b.Datastore == "ds-002" {
			return nil, errors.New("the worker refused it")
		}
		var out []BatchOutcome
		for _, vm := range b.VMs {
			out = append(out, BatchOutcome{TaskID: vm.TaskID, Fallback: true})
		}
		return out, nil
	}
	ws := []Worker{{Name: "w1", Slots: 2, Reach: Reach{Connections: []string{"lab"}, Datastores: []string{"lab/ds-001", "lab/ds-002"}}}}
	if err := e.eng.SetWorkers(ws); err != nil {
		t.Fatal(err)
	}
	p := testPolicy("ds")
	p.Group, p.StorageFallback = "datastore", "vm"
	res := e.run(p)
	if on := datastoresOf(res.Tasks); on["ds-001"] == 0 || on["ds-002"] == 0 {
		t.Fatalf("VMs by datastore %v: the test needs both", on)
	}
	byVM := map[string]bool{}
	for _, r := range br.attempts() {
		byVM[r.vm] = true
	}
	for _, tk := range res.Tasks {
		switch tk.Datastores[0] {
		case "ds-001":
			if tk.Status != catalog.StatusSuccess || tk.Attempts != 1 || !byVM[tk.VMName] {
				t.Errorf("%s on ds-001: %s, %d attempts, VM by VM %v; want success in 1 attempt, VM by VM", tk.VMName, tk.Status, tk.Attempts, byVM[tk.VMName])
			}
		default:
			if tk.Status != catalog.StatusFailed || byVM[tk.VMName] {
				t.Errorf("%s on %s: %s; want failed, never VM by VM", tk.VMName, tk.Datastores[0], tk.Status)
			}
		}
	}
	e.noLeaks()
}

// datastoresOf counts the tasks by their datastore.
func datastoresOf(tasks []catalog.Task) map[string]int {
	out := map[string]int{}
	for _, tk := range tasks {
		out[tk.Datastores[0]]++
	}
	return out
}

// workersConn is a connection whose batches its workers take (a fleet's
// stand-in).
type workersConn struct{ hypervisor.Connector }

func (workersConn) BatchesOnWorkers(context.Context) (bool, error) { return true, nil }

// A connection whose batches its workers take needs no storage snapshot
// provider here, but refuses kept storage snapshots; given no worker, its
// batches fail saying why, never run here.
func TestWorkersConnectionsBatches(t *testing.T) {
	e := newEnv(t, fake.Options{Seed: 23, VMs: 3, Hosts: 1, Datastores: 1, DiskSize: 64 << 10}, nil, func(o *Options) {
		o.Connectors["lab"] = workersConn{o.Connectors["lab"]}
		o.StorageSnapshotters = nil
	})
	p := testPolicy("ds")
	p.Group, p.KeepStorageSnapshots = "datastore", 2
	if _, err := e.eng.Start(context.Background(), p); err == nil || !strings.Contains(err.Error(), "keep-storage-snapshots") {
		t.Fatalf("kept storage snapshots on the workers' connection: %v, want refused", err)
	}
	p.KeepStorageSnapshots = 0
	res := e.run(p)
	for _, tk := range res.Tasks {
		if tk.Status != catalog.StatusFailed || !strings.Contains(tk.Error, "run on the workers") {
			t.Errorf("%s: %s (%s), want failed: no worker", tk.VMName, tk.Status, tk.Error)
		}
	}
	if n := e.fake.Counters(); n.Creates != 0 {
		t.Errorf("%d snapshots taken in this process", n.Creates)
	}
}
