package engine

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine/enginetest"
	"github.com/coffer-backup/coffer/internal/engine/ratelimit"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/fake"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
)

// current reads every disk of a VM as it is now, through a fresh fake
// session (closed with ok=false, so tracking is unaffected).
func (e *env) current(vm hypervisor.VM) map[string][]byte {
	e.t.Helper()
	ctx := context.Background()
	s, err := e.fake.Snapshot(ctx, vm.VMRef, hypervisor.SnapshotRequest{SessionID: "truth"})
	if err != nil {
		e.t.Fatal(err)
	}
	defer s.Close(ctx, false)
	out := map[string][]byte{}
	for _, d := range s.Disks() {
		r, _ := s.OpenDisk(ctx, d.Key)
		buf := make([]byte, r.Size())
		if _, err := r.ReadAt(buf, 0); err != nil {
			e.t.Fatal(err)
		}
		out[d.Key] = buf
	}
	return out
}

// checkRestores restores a backup point and compares it with want.
func (e *env) checkRestores(pointID string, want map[string][]byte) *repo.Point {
	e.t.Helper()
	ctx := context.Background()
	snaps, err := e.repo.Points(ctx, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, s := range snaps {
		if s.ID.String() != pointID {
			continue
		}
		if len(s.Disks) != len(want) {
			e.t.Fatalf("point %s has %d disks, want %d", s.ID.Short(), len(s.Disks), len(want))
		}
		for _, d := range s.Disks {
			out := filepath.Join(e.t.TempDir(), d.Key)
			if _, err := restore.ToFile(ctx, e.repo, s, d, out, restore.FileOptions{}); err != nil {
				e.t.Fatal(err)
			}
			got, _ := os.ReadFile(out)
			if !bytes.Equal(got, want[d.Key]) {
				e.t.Fatalf("point %s (%s of %s) disk %s differs from the VM at its instant", s.ID.Short(), s.Mode, s.Source.VMName, d.Key)
			}
		}
		return s
	}
	e.t.Fatalf("point %s not in the repository", pointID)
	return nil
}

func TestEndToEndPeriodicFullRetentionAndRestore(t *testing.T) {
	e := newEnv(t, fake.Options{Seed: 21, VMs: 3, MaxDisks: 2, DiskSize: 512 << 10}, nil, nil)
	vms, _ := e.fake.Inventory(context.Background())
	p := testPolicy("nightly")
	p.Select = policy.Selector{Names: []string{"web-*", "db-*", "app-*"}}
	p.Exclude = policy.Selector{Tags: map[string]string{"env": "staging"}} // vms[1]
	p.FullEvery = 3
	p.Retention.Last = 2
	p.Tags = map[string]string{"site": "lab"}
	wantModes := []string{"full", "incremental", "incremental", "full"}
	for run, want := range wantModes {
		if run > 0 {
			for _, vm := range vms {
				e.fake.Write(vm.Name, 2)
			}
		}
		truth := map[string]map[string][]byte{}
		for _, vm := range vms {
			truth[vm.Name] = e.current(vm)
		}
		res := e.run(p)
		if res.Job.Status != catalog.StatusSuccess || len(res.Tasks) != 2 {
			t.Fatalf("run %d: %s (%s), %d tasks", run+1, res.Job.Status, res.Job.Error, len(res.Tasks))
		}
		for _, tk := range res.Tasks {
			if tk.VMName == vms[1].Name {
				t.Fatalf("excluded VM %s was backed up", tk.VMName)
			}
			if tk.Mode != want {
				t.Errorf("run %d: %s backed up %s, want %s", run+1, tk.VMName, tk.Mode, want)
			}
			if want == "incremental" && tk.BytesRead > 2*2*fake.BlockSize*2 {
				t.Errorf("run %d: incremental of %s read %d bytes", run+1, tk.VMName, tk.BytesRead)
			}
			s := e.checkRestores(tk.BackupPointID, truth[tk.VMName])
			if s.Tags["policy"] != "nightly" || s.Tags["site"] != "lab" || s.JobID != res.Job.ID {
				t.Errorf("point tags %v job %d", s.Tags, s.JobID)
			}
		}
		if n := len(e.cat.EventsOf(res.Job.ID, "task-done")); n != 2 {
			t.Errorf("run %d: %d task-done events", run+1, n)
		}
		// The planner reads each VM's fixed cost of opening its disks and
		// the time of its transfer from here: both within the attempt,
		// and measured (not zero).
		for _, ev := range e.cat.EventsOf(res.Job.ID, "task-done") {
			setup, _ := ev.Fields["setup_seconds"].(float64)
			transfer, _ := ev.Fields["transfer_seconds"].(float64)
			if total, _ := ev.Fields["seconds"].(float64); setup <= 0 || transfer <= 0 || setup+transfer > total {
				t.Errorf("task-done's setup_seconds %v and transfer_seconds %v of %v seconds", setup, transfer, ev.Fields["seconds"])
			}
		}
		for _, ev := range e.cat.EventsOf(res.Job.ID, "snapshot-create") {
			if _, ok := ev.Fields["seconds"]; !ok {
				t.Errorf("snapshot event without duration: %+v", ev)
			}
		}
	}
	// Retention kept the newest two points per VM, in the repository and
	// in the catalog.
	snaps, _ := e.repo.Points(context.Background(), nil)
	if len(snaps) != 4 {
		t.Fatalf("%d points left after retention, want 2 per VM", len(snaps))
	}
	pts, _ := e.cat.ListBackupPoints(context.Background(), catalog.BackupPointFilter{})
	if len(pts) != 4 {
		t.Fatalf("%d points in the catalog", len(pts))
	}
	e.noLeaks()
}

func TestLeftoversCleanedAtStartNeverForeign(t *testing.T) {
	fo := fake.Options{Seed: 22, VMs: 6, DiskSize: 128 << 10, Allocated: 1}
	var br *blockingReads
	e := newEnv(t, fo, nil, func(o *Options) {
		br = &blockingReads{Connector: o.Connectors["lab"], reading: make(chan string, 8)}
		o.Connectors = map[string]hypervisor.Connector{"lab": br}
	})
	vms, _ := e.fake.Inventory(context.Background())
	e.fake.AddForeign(vms[0].Name, "before-upgrade")
	// coffer is "killed" while two VMs hold snapshots.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := testPolicy("killed")
	p.Tasks = 2
	job, err := e.eng.Start(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	<-br.reading
	<-br.reading
	e.fake.Crash()
	cancel()
	job.Wait()
	var left int
	for _, vm := range vms {
		for _, o := range e.fake.Objects(vm.Name) {
			if strings.HasPrefix(o, "coffer-") {
				left++
			}
		}
	}
	if left != 2 {
		t.Fatalf("%d coffer objects left by the crash, want 2", left)
	}
	e.fake.AddLeftover(vms[3].Name, "coffer-older-crash")
	// The next coffer start removes exactly coffer's leftovers.
	cat := enginetest.NewCatalog()
	eng, err := New(context.Background(), Options{Catalog: cat, Connectors: map[string]hypervisor.Connector{"lab": e.fake}})
	if err != nil {
		t.Fatal(err)
	}
	jobs, _ := cat.ListJobs(context.Background(), catalog.JobFilter{})
	if len(jobs) != 1 || jobs[0].Kind != "cleanup" || len(cat.EventsOf(jobs[0].ID, "cleanup")) != 3 {
		t.Fatalf("cleanup recorded as %+v with %d events", jobs, len(cat.EventsOf(jobs[0].ID, "cleanup")))
	}
	eng.Close()
	e.noLeaks()
	if got := e.fake.Objects(vms[0].Name); len(got) != 1 || got[0] != "before-upgrade" {
		t.Fatalf("foreign snapshot touched: %v", got)
	}
	// Nothing to clean: nothing recorded.
	cat2 := enginetest.NewCatalog()
	if _, err := New(context.Background(), Options{Catalog: cat2, Connectors: map[string]hypervisor.Connector{"lab": e.fake}}); err != nil {
		t.Fatal(err)
	}
	if jobs, _ := cat2.ListJobs(context.Background(), catalog.JobFilter{}); len(jobs) != 0 {
		t.Fatalf("an empty cleanup was recorded: %+v", jobs)
	}
}

func TestGroupModeStorageSnapshots(t *testing.T) {
	cfg := &policy.Config{Limits: policy.Limits{PerDatastore: 3}}
	e := newEnv(t, fake.Options{Seed: 23, VMs: 14, Hosts: 2, Datastores: 3, DiskSize: 256 << 10}, cfg, nil)
	vms, _ := e.fake.Inventory(context.Background())
	perDS := map[string]int{}
	for _, vm := range vms {
		perDS[vm.Datastores[0]]++
	}
	batches := 0
	for _, n := range perDS {
		batches += (n + 2) / 3
	}
	p := testPolicy("flashcopy")
	p.Group = "datastore"
	for run := range 2 {
		if run > 0 {
			for _, vm := range vms {
				e.fake.Write(vm.Name, 1)
			}
		}
		truth := map[string]map[string][]byte{}
		for _, vm := range vms {
			truth[vm.Name] = e.current(vm)
		}
		before := e.fake.Counters()
		res := e.run(p)
		if res.Job.Status != catalog.StatusSuccess {
			t.Fatalf("run %d: %s: %s", run+1, res.Job.Status, res.Job.Error)
		}
		if n := e.fake.Counters().StorageTaken - before.StorageTaken; n != batches {
			t.Errorf("run %d: %d storage snapshots, want %d (batches of at most 3 per datastore)", run+1, n, batches)
		}
		if n := len(e.cat.EventsOf(res.Job.ID, "group-snapshot")); n != batches {
			t.Errorf("run %d: %d group-snapshot events", run+1, n)
		}
		for _, tk := range res.Tasks {
			if run > 0 && (tk.Mode != "incremental" || tk.BytesRead > 2*fake.BlockSize) {
				t.Errorf("run 2: %s %s read %d bytes", tk.VMName, tk.Mode, tk.BytesRead)
			}
			e.checkRestores(tk.BackupPointID, truth[tk.VMName])
		}
	}
	if p := e.fake.Peaks(); p.MaxDatastore() > 3 {
		t.Fatalf("datastore peak %d > 3", p.MaxDatastore())
	}
	e.noLeaks()

	// A failing storage snapshot fails its datastore's VMs only.
	e.fake.FailStorage("ds-001", errors.New("array refused: pool full"))
	res := e.run(p)
	if res.Job.Status != catalog.StatusPartial || res.Job.TasksFail != perDS["ds-001"] {
		t.Fatalf("job %s, %d failed, want %d: %s", res.Job.Status, res.Job.TasksFail, perDS["ds-001"], res.Job.Error)
	}
	for _, tk := range res.Failed() {
		if !strings.Contains(tk.Error, "pool full") {
			t.Errorf("%s: %s", tk.VMName, tk.Error)
		}
	}
	e.noLeaks()
}

func TestRateLimits(t *testing.T) {
	// Requests above the burst are split instead of refused (rate.Limiter
	// alone refuses them)...
	fast := rate.NewLimiter(1<<40, 1<<20)
	if err := fast.WaitN(context.Background(), 3<<20); err == nil {
		t.Fatal("rate.Limiter accepted a request above its burst: the split is untested")
	}
	if err := (ratelimit.Limiter{fast}).WaitN(context.Background(), 3<<20); err != nil {
		t.Fatal(err)
	}
	// ...and every part is charged: at 1 byte/s, the first 1 MiB empties
	// the full bucket and the second is refused at once, its wait (12 days)
	// outlasting the context (whose deadline only bounds a hang).
	slow := rate.NewLimiter(1, 1<<20)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := (ratelimit.Limiter{slow}).WaitN(ctx, 2<<20); err == nil || !strings.Contains(err.Error(), "would exceed context deadline") {
		t.Fatalf("2 MiB from a 1 MiB bucket at 1 byte/s: %v", err)
	}
	if tokens := slow.Tokens(); tokens > 60 { // what a minute refills at most
		t.Fatalf("%.0f tokens left after the first 1 MiB part", tokens)
	}
	// The engine hands every task a limiter combining both buckets.
	cfg := &policy.Config{Limits: policy.Limits{Rate: 1 << 30, TaskRate: 1 << 29}}
	var mu sync.Mutex
	var got []int
	e := newEnv(t, fake.Options{Seed: 24, VMs: 2, DiskSize: 64 << 10}, cfg, func(o *Options) {
		o.Runner = func(ctx context.Context, w *repo.Writer, c hypervisor.Connector, r backup.VMRequest, bo backup.Options) (*repo.Point, error) {
			if l, ok := bo.Limiter.(ratelimit.Limiter); ok {
				mu.Lock()
				got = append(got, len(l))
				mu.Unlock()
			}
			return backup.BackupVM(ctx, w, c, r, bo)
		}
	})
	e.run(testPolicy("throttled"))
	if len(got) != 2 || got[0] != 2 || got[1] != 2 {
		t.Fatalf("limiters %v, want two buckets per task", got)
	}
	if l := ratelimit.Task(nil, 0); l != nil {
		t.Fatal("a limiter without limits")
	}
}

func TestPolicySelectingNothingFails(t *testing.T) {
	e := newEnv(t, fake.Options{Seed: 25, VMs: 2}, nil, nil)
	p := testPolicy("empty")
	p.Select.Names = []string{"no-such-vm-*"}
	res := e.run(p)
	if res.Job.Status != catalog.StatusFailed || !strings.Contains(res.Job.Error, "selects no VM") {
		t.Fatalf("job %s: %s", res.Job.Status, res.Job.Error)
	}
	p = testPolicy("no-connector")
	p.Connection = "elsewhere"
	if res := e.run(p); res.Job.Status != catalog.StatusFailed || !strings.Contains(res.Job.Error, "no connector") {
		t.Fatalf("job %s: %s", res.Job.Status, res.Job.Error)
	}
}
