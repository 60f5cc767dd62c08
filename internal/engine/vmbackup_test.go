package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/fake"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
)

// adHoc is a backup now of one VM of the fake connection, with the
// change-tracking self-check off (see testPolicy).
func adHoc(vm hypervisor.VM, mode string) VMBackup {
	return VMBackup{Connection: "lab", VM: vm, Mode: mode, Chain: "backup-vm@default", Object: "/repositories/default",
		Repository: "default", Settings: policy.Policy{Connection: "lab", ChangeCheck: -1, Tags: map[string]string{"why": "upgrade"}}}
}

// TestVMBackupOfOneVM backs up one VM now, full then incremental, through
// the engine's per-VM path: a job of kind backup-vm with one task, the
// chain and lock asked for handed to the backup, no policy tag on the
// points, the points in the catalog, the incremental restoring equal to
// the VM at its instant, and no other VM touched.
func TestVMBackupOfOneVM(t *testing.T) {
	var mu sync.Mutex
	var reqs []backup.VMRequest
	e := newEnv(t, fake.Options{Seed: 41, VMs: 3, DiskSize: 256 << 10}, nil, func(o *Options) {
		o.Runner = func(ctx context.Context, w *repo.Writer, conn hypervisor.Connector, req backup.VMRequest, bo backup.Options) (*repo.Point, error) {
			mu.Lock()
			reqs = append(reqs, req)
			mu.Unlock()
			return backup.BackupVM(ctx, w, conn, req, bo)
		}
	})
	vms, _ := e.fake.Inventory(context.Background())
	vm := vms[1]
	backUp := func(mode string) (*repo.Point, catalog.Job) {
		t.Helper()
		j, err := e.eng.StartVM(context.Background(), adHoc(vm, mode))
		if err != nil {
			t.Fatal(err)
		}
		res, err := j.Wait()
		if err != nil {
			t.Fatal(err)
		}
		snap, repoID, err := j.Point()
		if err != nil || res.Job.Status != catalog.StatusSuccess || repoID != e.repo.Config().ID {
			t.Fatalf("backup %s: %v, job %+v", mode, err, res.Job)
		}
		if len(res.Tasks) != 1 || res.Tasks[0].VMName != vm.Name || res.Tasks[0].BackupPointID != snap.ID.String() {
			t.Fatalf("tasks %+v", res.Tasks)
		}
		return snap, res.Job
	}
	full, job := backUp("incremental") // the first backup is full
	if full.Mode != "full" || job.Kind != catalog.KindBackupVM || job.Policy != "" || job.VM != vm.Name || job.Object != "/repositories/default" {
		t.Fatalf("point %s, job %+v", full.Mode, job)
	}
	e.fake.Write(vm.Name, 3)
	want := e.current(vm)
	inc, _ := backUp("incremental")
	if inc.Mode != "incremental" || inc.Parent != full.ID.String() {
		t.Fatalf("second backup: %s with parent %s, want an incremental of %s", inc.Mode, inc.Parent, full.ID)
	}
	e.checkRestores(inc.ID.String(), want)
	for _, s := range []*repo.Point{full, inc} {
		if _, tagged := s.Tags["policy"]; tagged || s.Tags["why"] != "upgrade" {
			t.Fatalf("point tags %v: want the ones asked for and no policy's", s.Tags)
		}
	}
	for _, r := range reqs {
		if r.Chain != "backup-vm@default" || r.VM.ID != vm.ID {
			t.Fatalf("backup request %+v", r)
		}
	}
	snaps, _ := e.repo.Points(context.Background(), nil)
	if len(snaps) != 2 {
		t.Fatalf("%d points in the repository, want the VM's 2", len(snaps))
	}
	points, _ := e.cat.ListBackupPoints(context.Background(), catalog.BackupPointFilter{})
	if len(points) != 2 || points[0].VMName != vm.Name || points[1].VMName != vm.Name {
		t.Fatalf("catalog points %+v", points)
	}
	e.noLeaks()
}

// TestVMBackupSharesLimitsWithPolicyRuns: a backup now waits for a slot
// of the limits a policy's run holds (here the one task of limits.tasks)
// instead of starting beside it.
func TestVMBackupSharesLimitsWithPolicyRuns(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	e := newEnv(t, fake.Options{Seed: 42, VMs: 2}, &policy.Config{Limits: policy.Limits{Tasks: 1}}, func(o *Options) {
		o.OpenRepository = nil
		o.Runner = func(context.Context, *repo.Writer, hypervisor.Connector, backup.VMRequest, backup.Options) (*repo.Point, error) {
			if calls.Add(1) == 1 {
				<-release // the policy's VM holds the only slot
			}
			return &repo.Point{Mode: "full"}, nil
		}
	})
	vms, _ := e.fake.Inventory(context.Background())
	p := testPolicy("nightly")
	p.Select = policy.Selector{Names: []string{vms[0].Name}}
	run, err := e.eng.Start(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	for calls.Load() == 0 {
		time.Sleep(time.Millisecond) // polling interval, not synchronisation
	}
	now, err := e.eng.StartVM(context.Background(), adHoc(vms[1], "full"))
	if err != nil {
		t.Fatal(err)
	}
	queued := func() int {
		e.eng.disp.mu.Lock()
		defer e.eng.disp.mu.Unlock()
		return len(e.eng.disp.queue)
	}
	deadline := time.Now().Add(time.Minute)
	for queued() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the backup of %s never queued for the slot the policy's run holds (runner called %d times)", vms[1].Name, calls.Load())
		}
		time.Sleep(time.Millisecond) // polling interval, not synchronisation
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d backups ran with one task allowed", n)
	}
	close(release)
	for _, j := range []*Job{run, now} {
		if res, err := j.Wait(); err != nil || res.Job.Status != catalog.StatusSuccess {
			t.Fatalf("job %+v: %v", res, err)
		}
	}
}

// TestVMBackupFailureKeepsItsError: a VM that fails gives Point the
// backup's error itself (so its class decides the exit code), after the
// retries of the settings; a lock on a repository without object lock is
// refused as such.
func TestVMBackupFailureKeepsItsError(t *testing.T) {
	e := newEnv(t, fake.Options{Seed: 43, VMs: 1, DiskSize: 128 << 10}, nil, nil)
	vms, _ := e.fake.Inventory(context.Background())
	gone := errors.New("the VM went away")
	e.fake.FailVM(vms[0].Name, gone, 1)
	j, err := e.eng.StartVM(context.Background(), adHoc(vms[0], "full"))
	if err != nil {
		t.Fatal(err)
	}
	res, _ := j.Wait()
	if _, _, err := j.Point(); !errors.Is(err, gone) || res.Job.Status != catalog.StatusFailed {
		t.Fatalf("Point: %v, job %+v", err, res.Job)
	}

	locked := adHoc(vms[0], "full")
	locked.RetainUntil = time.Now().Add(time.Hour)
	if j, err = e.eng.StartVM(context.Background(), locked); err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.Point(); !errors.Is(err, ErrCannotLock) {
		t.Fatalf("a lock on a repository without object lock: %v", err)
	}
	e.noLeaks()
}
