package plan

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/sqlite"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
)

// recordRun writes one finished run of policy nightly into the catalog as
// the engine does: a job, a task per VM and its events.
func recordRun(t *testing.T, cat catalog.Catalog, start time.Time, vms []recordedVM) {
	t.Helper()
	ctx := context.Background()
	j := &catalog.Job{Kind: catalog.KindBackupPolicy, Policy: "nightly", Status: catalog.StatusSuccess,
		Object: "/policies/nightly", CreatedAt: start, StartedAt: start, FinishedAt: start.Add(time.Minute)}
	if err := cat.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	var tasks []*catalog.Task
	for _, v := range vms {
		tasks = append(tasks, &catalog.Task{JobID: j.ID, Connection: "lab", VMID: v.id, VMName: v.id, Status: catalog.StatusSuccess,
			Mode: v.mode, StartedAt: start.Add(v.from), FinishedAt: start.Add(v.to), BytesRead: v.read, BytesStored: v.stored, BytesLogical: 1000})
	}
	if err := cat.CreateTasks(ctx, tasks); err != nil {
		t.Fatal(err)
	}
	var evs []catalog.Event
	for i, v := range vms {
		id := tasks[i].ID
		evs = append(evs,
			catalog.Event{JobID: j.ID, TaskID: id, Level: "info", Kind: "snapshot-create", Fields: map[string]any{"seconds": v.snapshot}},
			catalog.Event{JobID: j.ID, TaskID: id, Level: "info", Kind: "snapshot-remove", Fields: map[string]any{"seconds": v.release}},
			catalog.Event{JobID: j.ID, TaskID: id, Level: "info", Kind: "task-done", Fields: map[string]any{"seconds": v.total, "setup_seconds": v.setup, "transfer_seconds": v.transfer}})
	}
	if err := cat.AddEvents(ctx, evs); err != nil {
		t.Fatal(err)
	}
}

type recordedVM struct {
	id, mode                 string
	from, to                 time.Duration
	read, stored             int64
	snapshot, release, setup float64
	// total is the attempt's time, transfer its transfer's (task-done).
	total, transfer float64
}

func openCatalog(t *testing.T) catalog.Catalog {
	cat, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "catalog.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	return cat
}

func TestHistoryFromTheCatalog(t *testing.T) {
	cat := openCatalog(t)
	t0 := time.Date(2026, 11, 20, 22, 0, 0, 0, time.UTC)
	// vm-a: two incrementals, 100 and 300 MB read, snapshots of 2 and 4 s.
	// vm-b: one run only; the two overlap in the first run (concurrency 2).
	recordRun(t, cat, t0, []recordedVM{
		{"vm-a", "incremental", 0, 10 * time.Second, 100e6, 40e6, 2, 1, 0.5, 9, 3},
		{"vm-b", "full", 5 * time.Second, 20 * time.Second, 1000e6, 500e6, 3, 3, 1, 9, 3},
	})
	recordRun(t, cat, t0.Add(24*time.Hour), []recordedVM{
		{"vm-a", "incremental", 0, 10 * time.Second, 300e6, 80e6, 4, 1, 0.5, 9, 3},
	})
	h, err := ReadHistory(context.Background(), cat, "nightly", 10)
	if err != nil {
		t.Fatal(err)
	}
	a := h.VMs["lab/vm-a"]
	if a == nil || a.Runs != 2 {
		t.Fatalf("vm-a: %+v", a)
	}
	// Mean 3 s, sample deviation √((1+1)/1) = 1.414…; bytes mean 200 MB,
	// deviation √((100²+100²)/1) MB = 141.4 MB; stored 120 of 400 MB.
	if a.Snapshot.Mean != 3 || a.Snapshot.StdDev < 1.414 || a.Snapshot.StdDev > 1.415 {
		t.Errorf("vm-a snapshot %+v", a.Snapshot)
	}
	if b := a.Bytes["incremental"]; b.Mean != 200e6 || b.StdDev < 141.42e6 || b.StdDev > 141.43e6 {
		t.Errorf("vm-a bytes %+v", b)
	}
	if a.StoredRatio != 0.3 || a.Setup != Fixed(0.5) || a.Release != Fixed(1) {
		t.Errorf("vm-a stored ratio %v setup %+v release %+v", a.StoredRatio, a.Setup, a.Release)
	}
	// The rest of each 9 s attempt: 9 − 2 − 1 − 0.5 − 3 = 2.5 s, then
	// 9 − 4 − 1 − 0.5 − 3 = 0.5 s.
	if a.Other.Mean != 1.5 || a.Transfer["incremental"].Mean != 3 {
		t.Errorf("vm-a other %+v transfer %+v", a.Other, a.Transfer)
	}
	if len(h.Runs) != 2 || h.Runs[1].Concurrency != 2 || h.Runs[0].Concurrency != 1 || h.Runs[1].BytesRead != 1100e6 {
		t.Errorf("runs %+v", h.Runs)
	}
	// The first run's loads: vm-a alone for 5 of its 10 s, then with
	// vm-b: 1.5 in flight on average; vm-b with vm-a for 5 of its 15 s:
	// 20/15. Each attempt's fixed cost is its 9 s less the 3 s transfer.
	near := func(a, b float64) bool {
		return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(b), 1e-12) || math.Abs(a-b) < 1e-12
	}
	if r := h.Runs[1]; !near(r.Load, (1.5+20.0/15)/2) || r.FixedSeconds != 6 {
		t.Errorf("first run: load %v fixed %v, want %v and 6", r.Load, r.FixedSeconds, (1.5+20.0/15)/2)
	}
	if r := h.Runs[0]; r.Load != 1 || r.FixedSeconds != 6 {
		t.Errorf("second run: load %v fixed %v, want 1 and 6", r.Load, r.FixedSeconds)
	}
	// Transfer time per byte: 3 s + 3 s over 1100 MB, then 3 s over 300 MB.
	if a, b := h.Runs[1].TransferSecondsPerByte, h.Runs[0].TransferSecondsPerByte; !near(a, 6/1100e6) || !near(b, 3/300e6) {
		t.Errorf("transfer seconds per byte %v and %v, want %v and %v", a, b, 6/1100e6, 3/300e6)
	}

	// vm-c has no history: it takes the policy's means and says so.
	vm := func(id string) Target {
		return Target{"lab", hypervisor.VM{VMRef: hypervisor.VMRef{ID: id, Name: id}, Host: "h1", Datastores: []string{"ds1"},
			Disks: []hypervisor.DiskInfo{{Size: 10e9, Datastore: "ds1"}}}}
	}
	cfg := &policy.Config{Limits: policy.Limits{Tasks: 4}}
	in, as := BuildInput(Sources{Config: cfg, Policy: policy.Policy{Name: "nightly", Repository: "main", Mode: "incremental"},
		Targets: []Target{vm("vm-a"), vm("vm-c")}, History: h,
		Measured: Measurements{Pipeline: 500e6, Devices: map[string]float64{"repo:main": 200e6, "datastore:lab/ds1": 300e6}}})
	if in.Concurrency != 4 || len(in.Tasks) != 2 {
		t.Fatalf("input %+v", in)
	}
	if in.Tasks[0].Bytes.Mean != 200e6 || in.Tasks[1].Bytes != Fixed(0.05*10e9) {
		t.Errorf("bytes %+v and %+v", in.Tasks[0].Bytes, in.Tasks[1].Bytes)
	}
	// The policy's mean snapshot: vm-a 3 s and vm-b 3 s.
	if in.Tasks[1].Snapshot.Mean != 3 {
		t.Errorf("vm-c snapshot %+v, want the policy's mean 3 s", in.Tasks[1].Snapshot)
	}
	joined := strings.Join(as, "\n")
	for _, want := range []string{
		"an incremental run reads 5% of the disks (none recorded): 1 VM",
		"snapshot create: the policy's mean of 3.00 s (no run of their own recorded): 1 VM",
		"stored ratio 0.50 (bytes stored per byte read): 1 VM",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("assumptions\n%s\nlack %q", joined, want)
		}
	}
	if strings.Contains(joined, "pipeline") || strings.Contains(joined, "not measured") {
		t.Errorf("measured devices reported as assumed:\n%s", joined)
	}
	if in.Tasks[0].Transfer.Mean != 0 {
		t.Errorf("vm-a's datastore is measured, yet its recorded transfer time is used: %+v", in.Tasks[0].Transfer)
	}
	p, err := Predict(in)
	if err != nil || p.P50 <= 0 {
		t.Fatalf("%v %+v", err, p)
	}
	// Without the datastore's measurement, vm-a's recorded 3 s stand
	// for its transfer; vm-c, never recorded, moves its 500 MB (5% of
	// 10 GB) at the policy's recorded time per byte, vm-a's 3 s per
	// 200 MB: 7.5 s.
	in, as = BuildInput(Sources{Config: cfg, Policy: policy.Policy{Name: "nightly", Repository: "main", Mode: "incremental"},
		Targets: []Target{vm("vm-a"), vm("vm-c")}, History: h, Measured: Measurements{Pipeline: 500e6}})
	joined = strings.Join(as, "\n")
	if in.Tasks[0].Transfer.Mean != 3 || math.Abs(in.Tasks[1].Transfer.Mean-7.5) > 1e-9 ||
		!strings.Contains(joined, "transfer: the time recorded for the VM (incremental, its datastores not measured): 1 VM") ||
		!strings.Contains(joined, "transfer: the policy's mean recorded time per byte read, 0.015 s per MB (incremental, no run of their own recorded, datastores not measured): 1 VM") {
		t.Errorf("transfers %+v and %+v; assumptions %v", in.Tasks[0].Transfer, in.Tasks[1].Transfer, as)
	}
}
