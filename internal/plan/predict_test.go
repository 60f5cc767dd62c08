package plan

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/engine"
)

// fleet is the vSphere benchmark's shape (bench/vsphere): VM i on
// datastore i mod datastores, each datastore a pool of capacity dsCap,
// with fixed snapshot and release costs and nothing to read.
func fleet(datastores, perDS, dsCap int, snapshot, release float64) []Task {
	var ts []Task
	for i := range datastores * perDS {
		ts = append(ts, Task{Name: fmt.Sprintf("vm-%d", i), Size: 1 << 20,
			Pools:    []engine.SlotNeed{{Key: fmt.Sprintf("datastore:lab/ds-%d", i%datastores), Cap: dsCap}},
			Snapshot: Fixed(snapshot), Release: Fixed(release)})
	}
	return ts
}

// The limit-ideal formula of docs/benchmarks-vsphere.md,
// max(ceil(N / min(c, 8 × 100)), ceil(10 / 8)) × (500 ms + 500 ms), is
// the simulation without variance and without bytes.
func TestLimitIdealIsASpecialCase(t *testing.T) {
	for _, c := range []int{1, 8, 32, 64, 256, 1000} {
		p, err := Predict(Input{Tasks: fleet(100, 10, 8, 0.5, 0.5), Concurrency: c})
		if err != nil {
			t.Fatal(err)
		}
		waves := max(math.Ceil(1000/float64(min(c, 8*100))), math.Ceil(10.0/8))
		want := time.Duration(waves * float64(time.Second))
		if p.P50 != want || p.P90 != want {
			t.Errorf("concurrency %d: P50 %s P90 %s, the formula gives %s", c, p.P50, p.P90, want)
		}
		if p.Runs != 1 {
			t.Errorf("concurrency %d: %d runs of a model without variance", c, p.Runs)
		}
		if got := p.Peaks["global"]; got != min(c, 800) {
			t.Errorf("concurrency %d: peak in flight %d, want %d", c, got, min(c, 800))
		}
	}
}

// With 10 VMs on one datastore of 8 snapshots and room for all, the
// datastore is what the second wave waited for.
func TestCriticalPathNamesTheDatastore(t *testing.T) {
	p, err := Predict(Input{Tasks: fleet(1, 10, 8, 1, 1), Concurrency: 64})
	if err != nil {
		t.Fatal(err)
	}
	if p.P50 != 4*time.Second {
		t.Fatalf("P50 %s, want 4s (two waves of 2 s)", p.P50)
	}
	// Chain: a first-wave VM (0-2 s, started at once), then a
	// second-wave VM (2-4 s) that waited for the datastore.
	if p.CriticalPath.Tasks != 2 {
		t.Errorf("critical path of %d tasks, want 2", p.CriticalPath.Tasks)
	}
	want := []Share{{"datastore:lab/ds-0, capped at 8", 0.5}, {"nothing (started at once)", 0.5}}
	if fmt.Sprint(p.CriticalPath.WaitedOn) != fmt.Sprint(want) {
		t.Errorf("waited on %v, want %v", p.CriticalPath.WaitedOn, want)
	}
	wantWork := []Share{{"snapshot create", 0.5}, {"snapshot remove", 0.5}}
	if fmt.Sprint(p.CriticalPath.Work) != fmt.Sprint(wantWork) {
		t.Errorf("work %v, want %v", p.CriticalPath.Work, wantWork)
	}
	if p.Bottleneck != "datastore:lab/ds-0, capped at 8: on the critical path 50% of the time" {
		t.Errorf("bottleneck %q", p.Bottleneck)
	}
	// The datastore is at capacity for the first wave only (the second
	// has 2 VMs): 0-2 s of 4 s.
	b := find(p.Busy, "datastore:lab/ds-0")
	if b == nil || b.Share != 0.5 || b.From != 0 || b.To != 2*time.Second {
		t.Errorf("datastore busy %+v, want half the run, 0-2 s", b)
	}
}

func find(bs []Busy, key string) *Busy {
	for i := range bs {
		if bs[i].Resource == key {
			return &bs[i]
		}
	}
	return nil
}

// Two VMs of 100 MB read at once from a datastore of 100 MB/s share it:
// 50 MB/s each, 2 s; the datastore is busy the whole run.
func TestTransfersShareTheSlowestDevice(t *testing.T) {
	vm := func(name string) Task {
		return Task{Name: name, Size: 100e6, Bytes: Fixed(100e6),
			Path: []Crossing{{"datastore:lab/ds", 1}, {"repo:main", 0.5}}}
	}
	in := Input{Tasks: []Task{vm("a"), vm("b")}, Concurrency: 2,
		Devices: map[string]float64{"datastore:lab/ds": 100e6, "repo:main": 1000e6}}
	p, err := Predict(in)
	if err != nil {
		t.Fatal(err)
	}
	if p.P50 != 2*time.Second {
		t.Errorf("P50 %s, want 2s", p.P50)
	}
	if b := find(p.Busy, "datastore:lab/ds"); b == nil || b.Share != 1 {
		t.Errorf("datastore busy %+v, want the whole run", b)
	}
	if b := find(p.Busy, "repo:main"); b != nil {
		t.Errorf("repository busy %+v: it writes 100 of its 1000 MB/s", b)
	}
	if p.CriticalPath.Work[0].What != "transfer at datastore:lab/ds" || p.CriticalPath.Work[0].Share != 1 {
		t.Errorf("work %v", p.CriticalPath.Work)
	}
	if p.Bottleneck != "transfer at datastore:lab/ds: 100% of the critical path" {
		t.Errorf("bottleneck %q", p.Bottleneck)
	}

	// Writes of 0.5 byte per byte read into a repository of 40 MB/s:
	// each VM reads at 40 MB/s (20 MB/s of writes each), 2.5 s.
	in.Devices["repo:main"] = 40e6
	if p, _ = Predict(in); p.P50 != 2500*time.Millisecond {
		t.Errorf("repository-bound: P50 %s, want 2.5s", p.P50)
	}
	// A per-task rate of 30 MB/s below every share: 100/30 s.
	in.TaskRate = 30e6
	if p, _ = Predict(in); p.P50 != seconds(100.0/30) {
		t.Errorf("task-rate-bound: P50 %s, want %s", p.P50, seconds(100.0/30))
	}
}

// One VM started alone reads at the full rate; when a second starts its
// transfer halfway, both slow down: 100 MB at 100 MB/s after a 0.5 s
// snapshot, and 100 MB after a 1 s snapshot: a reads 50 MB alone
// (0.5-1 s), then both share 50 MB/s; a ends at 2 s, b has 50 MB left at
// 100 MB/s: 2.5 s.
func TestRatesChangeAsTransfersStartAndEnd(t *testing.T) {
	path := []Crossing{{"datastore:lab/ds", 1}}
	in := Input{Concurrency: 2, Devices: map[string]float64{"datastore:lab/ds": 100e6}, Tasks: []Task{
		{Name: "a", Size: 2, Snapshot: Fixed(0.5), Bytes: Fixed(100e6), Path: path},
		{Name: "b", Size: 1, Snapshot: Fixed(1), Bytes: Fixed(100e6), Path: path},
	}}
	p, err := Predict(in)
	if err != nil {
		t.Fatal(err)
	}
	if p.P50 != 2500*time.Millisecond {
		t.Errorf("P50 %s, want 2.5s", p.P50)
	}
}

// A VM with two disks on one datastore takes two of its slots, as in the
// engine: with a capacity of 2, the two such VMs run one after the other.
func TestADatastoreNamedTwiceTakesTwoSlots(t *testing.T) {
	two := []engine.SlotNeed{{Key: "datastore:lab/ds", Cap: 2}, {Key: "datastore:lab/ds", Cap: 2}}
	in := Input{Concurrency: 8, Tasks: []Task{
		{Name: "a", Pools: two, Snapshot: Fixed(1)},
		{Name: "b", Pools: two, Snapshot: Fixed(1)},
	}}
	p, err := Predict(in)
	if err != nil {
		t.Fatal(err)
	}
	if p.P50 != 2*time.Second || p.Peaks["datastore:lab/ds"] != 2 {
		t.Errorf("P50 %s peak %d, want 2s and 2 slots", p.P50, p.Peaks["datastore:lab/ds"])
	}
}

// The Monte Carlo: the window's chance is the share of runs within it,
// P90 is not below P50, and a seed gives the same answer again.
func TestVarianceGivesPercentilesAndTheWindowsChance(t *testing.T) {
	ts := fleet(4, 10, 8, 0.5, 0.5)
	for i := range ts {
		ts[i].Snapshot = Dist{Mean: 0.5, StdDev: 0.2}
	}
	in := Input{Tasks: ts, Concurrency: 8, Runs: 200, Seed: 7}
	p, err := Predict(in)
	if err != nil {
		t.Fatal(err)
	}
	if p.Runs != 200 || p.P90 < p.P50 {
		t.Fatalf("runs %d, P50 %s, P90 %s", p.Runs, p.P50, p.P90)
	}
	// 40 VMs, 8 at a time: 5 waves of about 1 s each.
	if p.P50 < 4*time.Second || p.P50 > 7*time.Second {
		t.Errorf("P50 %s, far from 5 waves of about 1 s", p.P50)
	}
	in.Window = p.P50
	q, _ := Predict(in)
	if q.InWindow < 0.45 || q.InWindow > 0.55 {
		t.Errorf("chance within the P50: %.2f, want about half", q.InWindow)
	}
	in.Window = p.P90
	if q, _ = Predict(in); q.InWindow < 0.85 || q.InWindow > 0.95 {
		t.Errorf("chance within the P90: %.2f, want about 0.9", q.InWindow)
	}
	if q.P50 != p.P50 || q.P90 != p.P90 {
		t.Errorf("the same seed gave %s/%s then %s/%s", p.P50, p.P90, q.P50, q.P90)
	}
}

func TestBadInputIsRefused(t *testing.T) {
	if _, err := Predict(Input{Tasks: fleet(1, 1, 8, 1, 1)}); err == nil || !strings.Contains(err.Error(), "concurrency") {
		t.Errorf("concurrency 0: %v", err)
	}
	ts := fleet(1, 1, 8, 1, 1)
	ts[0].Bytes = Dist{Mean: -1}
	if _, err := Predict(Input{Tasks: ts, Concurrency: 1}); err == nil || !strings.Contains(err.Error(), "vm-0") {
		t.Errorf("negative bytes: %v", err)
	}
}

// A recorded transfer time is taken as it is, whatever the path's rates;
// the other phases add up: 1 + 0.5 + 2 + 0.25 + 1 = 4.75 s a VM, and a
// second VM reading bytes at rates is not slowed by the first.
func TestRecordedTransferAndOtherWork(t *testing.T) {
	path := []Crossing{{"datastore:lab/ds", 1}}
	in := Input{Concurrency: 2, Devices: map[string]float64{"datastore:lab/ds": 1e6}, Tasks: []Task{
		{Name: "recorded", Size: 2, Snapshot: Fixed(1), Setup: Fixed(0.5), Transfer: Fixed(2), Other: Fixed(0.25), Release: Fixed(1),
			Bytes: Fixed(100e6), Path: path},
		{Name: "at-rates", Size: 1, Bytes: Fixed(3e6), Path: path},
	}}
	p, err := Predict(in)
	if err != nil {
		t.Fatal(err)
	}
	// at-rates: 3 MB alone at 1 MB/s, 3 s.
	if p.P50 != 4750*time.Millisecond {
		t.Errorf("P50 %s, want 4.75s", p.P50)
	}
	want := []Share{{"transfer (as recorded)", 2 / 4.75}, {"snapshot create", 1 / 4.75}, {"snapshot remove", 1 / 4.75},
		{"setup", 0.5 / 4.75}, {"other per-VM work", 0.25 / 4.75}}
	if fmt.Sprint(p.CriticalPath.Work) != fmt.Sprint(want) {
		t.Errorf("work %v, want %v", p.CriticalPath.Work, want)
	}
}
