package plan

import (
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/retention"
)

const gib = float64(1 << 30)

func daily(t *testing.T) cron.Schedule {
	sc, err := cron.ParseStandard("0 22 * * *")
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// monday is a Monday's run, 22:00 UTC, the simulations' first.
var monday = time.Date(2026, 1, 5, 22, 0, 0, 0, time.UTC)

func vmsOf(n int, v CapacityVM) []CapacityVM {
	out := make([]CapacityVM, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// The issue's case, by hand: 10 VMs of 100 GiB, 2% of it changed a day,
// stored at half its size, runs every evening, keep 7 daily and 4
// weekly. On a Sunday the points are that week's seven days and the
// three Sundays before: the oldest is 21 runs back, so each VM holds
// its 100 GiB and 21 × 2 GiB of change, halved: 71 GiB; ten points of
// disk maps. On a Monday the weekly points are yesterday, and the
// Sundays 8 and 15 runs back: 15 runs of change, nine points.
func TestCapacityOfTheIssuesCase(t *testing.T) {
	in := CapacityInput{VMs: vmsOf(10, CapacityVM{Used: 100 * gib, Change: 2 * gib, Reduction: 0.5}),
		Retention: retention.Policy{Daily: 7, Weekly: 4}, Schedule: daily(t), First: monday, Now: monday.AddDate(0, 0, 40),
		Location: time.UTC}
	f, err := ForecastCapacity(in)
	if err != nil {
		t.Fatal(err)
	}
	const chunks = 100 << 30 / DefaultChunkSize // chunks of one VM's used bytes: 409,600
	// Per VM: the data; the disk maps of the points; a pack and an index
	// entry per chunk of the unique bytes (used and the change).
	peakData, peakMeta := 10*0.5*(100+21*2)*gib, 10*(10*32*chunks+108*(100+21*2)*gib/DefaultChunkSize)
	lowData, lowMeta := 10*0.5*(100+15*2)*gib, 10*(9*32*chunks+108*(100+15*2)*gib/DefaultChunkSize)
	if f.Peak.Data != peakData || f.Peak.Metadata != peakMeta || f.Peak.Points != 10 || f.Peak.At.Weekday() != time.Sunday {
		t.Errorf("peak %+v, want data %.0f metadata %.0f in 10 points on a Sunday", f.Peak, peakData, peakMeta)
	}
	if f.Peak.Bytes() != 764_295_577_600 {
		t.Errorf("peak %.0f bytes, want 764,295,577,600", f.Peak.Bytes())
	}
	if f.Low.Data != lowData || f.Low.Metadata != lowMeta || f.Low.Points != 9 || f.Low.At.Weekday() != time.Monday {
		t.Errorf("low %+v, want data %.0f metadata %.0f in 9 points on a Monday", f.Low, lowData, lowMeta)
	}
	// The first time the span reaches 15 runs: run 21 (the 4th Monday
	// after the first, its oldest point the first Sunday, run 6).
	if want := monday.AddDate(0, 0, 21); !f.Steady.Equal(want) {
		t.Errorf("steady from %v, want %v", f.Steady, want)
	}
	// From the first run's 10 × 50 GiB (and its maps and entries) to
	// the low in 21 days.
	first := 10*0.5*100*gib + 10*(32*chunks+108*100*gib/DefaultChunkSize)
	if want := (f.Low.Bytes() - first) / 21; f.RunsPerDay != 1 || f.GrowthPerDay != want {
		t.Errorf("%v runs a day, growth %.0f bytes a day, want 1 and %.0f", f.RunsPerDay, f.GrowthPerDay, want)
	}
	// Now is 40 days in: a Saturday's size (span 20).
	if f.Resumed || f.Now.At != monday.AddDate(0, 0, 40) || f.Now.Data != 10*0.5*(100+20*2)*gib {
		t.Errorf("now %+v", f.Now)
	}
}

// A gap between kept points longer than a whole rewrite counts the used
// bytes once, not the change times the runs.
func TestCapacityChangeIsCappedAtAWholeRewrite(t *testing.T) {
	in := CapacityInput{VMs: []CapacityVM{{Used: 100 * gib, Change: 40 * gib, Reduction: 1}},
		Retention: retention.Policy{Daily: 1, Weekly: 3}, Schedule: daily(t), First: monday, Now: monday.AddDate(0, 0, 60),
		Location: time.UTC}
	f, err := ForecastCapacity(in)
	if err != nil {
		t.Fatal(err)
	}
	// Sunday: that day and the two Sundays before, 7 runs apart each:
	// 100 + 100 + 100 GiB. Monday: 7 runs, then 1: 100 + 100 + 40.
	if f.Peak.Data != 300*gib || f.Low.Data != 240*gib || f.Low.At.Weekday() != time.Monday {
		t.Errorf("peak %+v low %+v", f.Peak, f.Low)
	}
}

// Keep-last holds the newest points whatever the calendar; a retention
// that keeps everything grows by each run's change for ever.
func TestCapacityKeepLastAndKeepEverything(t *testing.T) {
	vms := []CapacityVM{{Used: 8 << 20, Change: 1 << 20, Reduction: 0.5}, {Used: 4 << 20, Change: 0, Reduction: 1}}
	in := CapacityInput{VMs: vms, Retention: retention.Policy{Last: 3}, Schedule: daily(t), First: monday, Now: monday.AddDate(0, 0, 3),
		Location: time.UTC, ChunkSize: 1 << 20}
	f, err := ForecastCapacity(in)
	if err != nil {
		t.Fatal(err)
	}
	// (8 + 2 × 1) × 0.5 + 4 MiB, maps of 8 + 4 chunks in 3 points, and
	// an entry per chunk of 8 + 2 + 4 MiB.
	want := CapacitySize{At: f.Peak.At, Data: 9 << 20, Metadata: 3*32*12 + 108*14, Points: 3}
	if f.Peak != want || f.Low.Bytes() != want.Bytes() || !f.Steady.Equal(monday.AddDate(0, 0, 2)) {
		t.Errorf("peak %+v low %+v steady %v, want %+v from %v", f.Peak, f.Low, f.Steady, want, monday.AddDate(0, 0, 2))
	}
	in.Retention = retention.Policy{}
	if f, err = ForecastCapacity(in); err != nil {
		t.Fatal(err)
	}
	perRun := float64(512<<10) + 32*12 + 108
	if !f.Steady.IsZero() || f.GrowthPerDay != perRun || f.Peak.At.Before(in.Now.Add(365*24*time.Hour)) {
		t.Errorf("keep everything: steady %v, growth %.0f a day (want %.0f), peak %+v", f.Steady, f.GrowthPerDay, perRun, f.Peak)
	}
}

// A policy older than anything its retention keeps is simulated from as
// far back as it keeps, and is in its steady state now.
func TestCapacityOfAnOldPolicy(t *testing.T) {
	in := CapacityInput{VMs: vmsOf(2, CapacityVM{Used: 100 * gib, Change: 2 * gib, Reduction: 0.5}),
		Retention: retention.Policy{Daily: 7, Weekly: 4}, Schedule: daily(t), First: monday.AddDate(-5, 0, 0), Now: monday.AddDate(0, 0, 100),
		Location: time.UTC}
	f, err := ForecastCapacity(in)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Resumed || len(f.Sizes) > 200 || f.Peak.Data != 2*0.5*142*gib || f.Now.Data != 2*0.5*134*gib {
		t.Errorf("resumed %v after %d runs: peak %+v now %+v", f.Resumed, len(f.Sizes), f.Peak, f.Now)
	}
}

// Where a VM has no history, the forecast says what it assumed, and
// takes the policy's means where other VMs have them.
func TestCapacityAssumptions(t *testing.T) {
	vm := func(id string) Target {
		return Target{"lab", hypervisor.VM{VMRef: hypervisor.VMRef{ID: id, Name: id}, Disks: []hypervisor.DiskInfo{{Size: 10e9}}}}
	}
	pol := policy.Policy{Name: "nightly", Retention: retention.Policy{Daily: 7}}
	in, as := BuildCapacity(CapacitySources{Policy: pol, Targets: []Target{vm("a")}, Now: monday})
	if len(in.VMs) != 1 || in.VMs[0] != (CapacityVM{Used: 10e9, Change: 0.05 * 10e9, Reduction: 0.5}) {
		t.Errorf("vms %+v", in.VMs)
	}
	joined := strings.Join(as, "\n")
	for _, want := range []string{
		"no schedule: one run a day assumed",
		"used bytes: the disks' provisioned size (no run recorded): 1 VM",
		"change per run: 5% of used bytes (none recorded: a VM's first run stores it whole): 1 VM",
		"reduction 0.50 (no run recorded): 1 VM",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("assumptions\n%s\nlack %q", joined, want)
		}
	}
	// b recorded new bytes: 1% of its used bytes a run, stored at 0.4.
	h := &History{VMs: map[string]*VMHistory{"lab/b": {Storage: StorageHistory{Used: 20e9, UsedFrom: UsedRecorded,
		Change: 0.2e9, ChangeFrom: FromNew, Reduction: 0.4, ReductionFrom: FromNew}}}}
	pol.Schedule = "0 22 * * *"
	in, as = BuildCapacity(CapacitySources{Policy: pol, Targets: []Target{vm("a"), vm("b")}, History: h, Now: monday})
	if in.VMs[0] != (CapacityVM{Used: 10e9, Change: 0.01 * 10e9, Reduction: 0.4}) || in.VMs[1] != (CapacityVM{Used: 20e9, Change: 0.2e9, Reduction: 0.4}) {
		t.Errorf("vms %+v", in.VMs)
	}
	joined = strings.Join(as, "\n")
	for _, want := range []string{
		"change per run: the policy's mean of 1.00% of used bytes (none of their own recorded): 1 VM",
		"reduction: the policy's mean of 0.40 (none of their own recorded): 1 VM",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("assumptions\n%s\nlack %q", joined, want)
		}
	}
	if strings.Contains(joined, "schedule") || strings.Count(joined, ": 1 VM") != 3 {
		t.Errorf("assumed for the recorded VM or the schedule:\n%s", joined)
	}
}
