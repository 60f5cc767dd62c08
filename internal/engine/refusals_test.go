package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/fake"
)

// TestGroupDatastoreWithoutProviderIsRefused: a group: datastore policy on
// a connection without a storage snapshot provider does not start (no
// job, no snapshot) instead of quietly backing its VMs up one by one.
func TestGroupDatastoreWithoutProviderIsRefused(t *testing.T) {
	e := newEnv(t, fake.Options{Seed: 31, VMs: 3, DiskSize: 128 << 10}, nil, func(o *Options) { o.StorageSnapshotters = nil })
	p := testPolicy("flashcopy")
	p.Group = "datastore"
	j, err := e.eng.Start(context.Background(), p)
	if err == nil {
		j.Wait()
		t.Fatal("started")
	}
	for _, want := range []string{"policy flashcopy: group: datastore needs a storage snapshot provider, and connection lab has none", "remove `group: datastore`"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err %q lacks %q", err, want)
		}
	}
	if jobs, _ := e.cat.ListJobs(context.Background(), catalog.JobFilter{}); len(jobs) != 0 {
		t.Errorf("a refused policy recorded jobs: %+v", jobs)
	}
	if n := e.fake.Counters(); n.Creates != 0 || n.StorageTaken != 0 {
		t.Errorf("a refused policy took snapshots: %+v", n)
	}
}

// TestAsIsNeverReadsARunningVM: snapshot: as-is takes no snapshot, so a
// running VM fails with the reason and is never read; a stopped VM is
// backed up and restores to its data.
func TestAsIsNeverReadsARunningVM(t *testing.T) {
	e := newEnv(t, fake.Options{Seed: 37, VMs: 3, Hosts: 1, Datastores: 1, DiskSize: 128 << 10}, nil, nil)
	vms, _ := e.fake.Inventory(context.Background())
	stopped := vms[1]
	e.fake.SetPowerState(stopped.Name, "stopped")
	truth := e.current(stopped)
	before := e.fake.Counters()
	p := testPolicy("as-is")
	p.Snapshot = string(hypervisor.AsIs)
	res := e.run(p)
	if res.Job.Status != catalog.StatusPartial || res.Job.TasksFail != 2 {
		t.Fatalf("job %s, %d failed: %s", res.Job.Status, res.Job.TasksFail, res.Job.Error)
	}
	for _, tk := range res.Tasks {
		switch {
		case tk.VMName == stopped.Name:
			if tk.Status != catalog.StatusSuccess {
				t.Fatalf("stopped VM: %s %s", tk.Status, tk.Error)
			}
			e.checkRestores(tk.BackupPointID, truth)
		case tk.Status != catalog.StatusFailed || !strings.Contains(tk.Error, tk.VMName+" is running and snapshot: as-is takes no snapshot"):
			t.Errorf("running VM %s: %s %q", tk.VMName, tk.Status, tk.Error)
		}
	}
	if n := e.fake.Counters().Creates - before.Creates; n != 1 {
		t.Errorf("%d sessions opened, want 1 (the stopped VM's)", n)
	}
	e.noLeaks()
}
