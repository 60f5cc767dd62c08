package plan

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
)

// fleetScenario is VMs on connection "c" of the given kind, spread over
// hosts as given (host name: VMs), each recorded with a 1 s snapshot, 1 s
// setup and 2 s release (4 s a VM) and reading bytes in a full run.
func fleetScenario(kind string, hosts map[string]int, bytes float64) Scenario {
	h := &History{VMs: map[string]*VMHistory{}}
	var ts []Target
	for _, host := range []string{"h1", "h2", "h3"} {
		for i := range hosts[host] {
			id := fmt.Sprintf("%s-vm%02d", host, i)
			ts = append(ts, Target{"c", hypervisor.VM{VMRef: hypervisor.VMRef{ID: id, Name: id}, Host: host, Datastores: []string{"ds"},
				Disks: []hypervisor.DiskInfo{{Size: 1e9, Datastore: "ds"}}}})
			h.VMs[VMKey("c", id)] = &VMHistory{Runs: 1, Snapshot: Fixed(1), Setup: Fixed(1), Release: Fixed(2),
				Bytes: map[string]Dist{"full": Fixed(bytes)}, StoredRatio: 0.5}
		}
	}
	cfg := &policy.Config{Limits: policy.Limits{Tasks: 12, PerDatastore: 30}, Connections: []policy.Connection{{Name: "c", Kind: kind}}}
	return Scenario{Config: cfg, Policy: policy.Policy{Name: "nightly", Mode: "full"}, Targets: ts, History: h}
}

func plans(t *testing.T, sc Scenario, m Measurements, whatIfs ...string) map[string]*Prediction {
	t.Helper()
	var vs []Variation
	for _, s := range whatIfs {
		v, err := ParseVariation(s)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	rep, err := Make(Request{Scenario: sc, Variations: vs, Measured: m})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*Prediction{}
	for _, o := range rep.Outcomes {
		out[o.Name] = o.Prediction
	}
	return out
}

// Throughput scales with workers when they are the bottleneck: their
// slots, or their pipelines. (This 2-core machine cannot show it for
// real; the simulation, with the engine's pools, can.)
func TestMoreWorkersFinishSooner(t *testing.T) {
	even := map[string]int{"h1": 10, "h2": 10, "h3": 10}
	// Slots: 30 VMs of 4 s, 2 at a time on one worker, 6 on three.
	p := plans(t, fleetScenario("vsphere", even, 0), Measurements{Pipeline: 1e12}, "workers=1x2", "workers=3x2")
	if got := p["workers=1x2"].P50; got != 60*time.Second {
		t.Errorf("one worker of 2 slots: %s, want 1m0s", got)
	}
	if got := p["workers=3x2"].P50; got != 20*time.Second {
		t.Errorf("three workers of 2 slots: %s, want 20s", got)
	}
	if got := p["as configured"].P50; got != 12*time.Second {
		t.Errorf("one process, limits.tasks 12: %s, want 12s", got)
	}
	if n := p["workers=3x2"].Peaks["worker:w2"]; n != 2 {
		t.Errorf("worker w2 peak %d, want its 2 slots", n)
	}
	if !strings.Contains(p["workers=1x2"].Bottleneck, "worker:w1, capped at 2") {
		t.Errorf("bottleneck %q", p["workers=1x2"].Bottleneck)
	}
	// workers=N simulates the policy's own workers: its affinity, which
	// names real ones, does not strand its VMs.
	pinned := fleetScenario("vsphere", even, 0)
	pinned.Policy.Workers = []string{"proxy1"}
	if got := plans(t, pinned, Measurements{Pipeline: 1e12}, "workers=3x2")["workers=3x2"].P50; got != 20*time.Second {
		t.Errorf("three workers of 2 slots for a policy with workers: %s, want 20s", got)
	}
	// The scenario's own workers, and fewer slots on each.
	sc := fleetScenario("vsphere", even, 0)
	sc.Workers = evenWorkers(sc, 3, 2)
	p = plans(t, sc, Measurements{Pipeline: 1e12}, "worker-slots=1")
	if a, b := p["as configured"].P50, p["worker-slots=1"].P50; a != 20*time.Second || b != 40*time.Second {
		t.Errorf("three workers of 2 slots %s, of 1 slot %s; want 20s and 40s", a, b)
	}
	// Pipelines: 30 GB through one 100 MB/s pipeline, or three.
	p = plans(t, fleetScenario("vsphere", even, 1e9), Measurements{Pipeline: 1e8}, "workers=1x12", "workers=3x4")
	one, three := p["workers=1x12"].P50, p["workers=3x4"].P50
	t.Logf("pipeline-bound: one worker %s, three %s, one process %s", one, three, p["as configured"].P50)
	if one < 300*time.Second || three > one/2 {
		t.Errorf("one worker %s, three %s: three pipelines should take about a third", one, three)
	}
	if !strings.Contains(p["workers=1x12"].Bottleneck, "transfer at pipeline:w1") {
		t.Errorf("bottleneck %q", p["workers=1x12"].Bottleneck)
	}
}

// Host-bound VMs (QEMU) run on their host's worker only: a crowded host
// takes as long as its worker needs, whatever the others' slots.
func TestWorkersKeepHostAffinity(t *testing.T) {
	crowded := map[string]int{"h1": 12, "h2": 3, "h3": 3}
	// qemu: h1's 12 VMs on w1's 2 slots, 6 waves of 4 s; vSphere: 18 VMs
	// on 6 slots, 3 waves.
	for kind, want := range map[string]time.Duration{"qemu": 24 * time.Second, "vsphere": 12 * time.Second} {
		p := plans(t, fleetScenario(kind, crowded, 0), Measurements{Pipeline: 1e12}, "workers=3x2")
		if got := p["workers=3x2"].P50; got != want {
			t.Errorf("%s: %s, want %s", kind, got, want)
		}
	}
	// Two workers for three hosts: h3 goes to w1 with h1.
	sc := fleetScenario("qemu", crowded, 0)
	ws := evenWorkers(sc, 2, 1)
	if got := fmt.Sprint(ws[0].Reach.Hosts, ws[1].Reach.Hosts); got != "[c/h1 c/h3] [c/h2]" {
		t.Errorf("hosts dealt %s", got)
	}
	// A host no worker reaches: the engine would wait for ever, the plan
	// says so.
	in, _ := BuildInput(Sources{Config: sc.Config, Policy: sc.Policy, Targets: sc.Targets, History: sc.History,
		Measured: Measurements{Pipeline: 1e12}, Workers: []engine.Worker{{Name: "w1", Slots: 2, Reach: engine.Reach{Connections: []string{"c"}, Hosts: []string{"c/h1", "c/h2"}}}}})
	if _, err := Predict(in); err == nil || !strings.Contains(err.Error(), "no worker reaches host h3") {
		t.Errorf("a VM no worker reaches: %v", err)
	}
}

func TestWorkerWhatIfsRefused(t *testing.T) {
	for _, s := range []string{"workers=0", "workers=3x", "workers=3x0", "worker-slots=x"} {
		if _, err := ParseVariation(s); err == nil {
			t.Errorf("%s accepted", s)
		}
	}
	v, err := ParseVariation("worker-slots=2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Apply(fleetScenario("vsphere", map[string]int{"h1": 1}, 0)); err == nil {
		t.Error("worker-slots without workers accepted")
	}
}
