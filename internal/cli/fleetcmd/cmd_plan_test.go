package fleetcmd_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

const planConfig = `
connections:
  - name: lab
    kind: fake
    options: {seed: 5, vms: 6, hosts: 2, datastores: 1, disk-size: 256KiB}
limits:
  tasks: 4
  per-datastore: 2
policies:
  - name: all
    connection: lab
    schedule: "@daily"
`

// The planner end to end: two real runs recorded by the engine, the
// machine measured by coffer bench, then the plan learns from both.
func TestBenchAndPlan(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	e.Config(planConfig)
	e.Must("run", "all")
	e.Must("run", "all")

	var pipe api.PipelineBench
	if err := json.Unmarshal([]byte(e.Must("bench", "pipeline", "--level", "1", "--size", "8MiB", "--json")), &pipe); err != nil ||
		len(pipe.Levels) != 1 || pipe.Levels[0].RateBytesPerSecond <= 0 || pipe.Host == "" {
		t.Fatalf("bench pipeline: %+v %v", pipe, err)
	}
	var dev api.DeviceBench
	if err := json.Unmarshal([]byte(e.Must("bench", "device", t.TempDir(), "--as", "datastore:lab/ds-001", "--size", "8MiB", "--json")), &dev); err != nil ||
		dev.Device != "datastore:lab/ds-001" || dev.DuplexReadBytesPerSecond <= 0 {
		t.Fatalf("bench device: %+v %v", dev, err)
	}
	e.Expect(command.ExitUsage, "bench", "device", t.TempDir(), "--as", "disk7")
	e.Expect(command.ExitUsage, "bench", "device", "/nonexistent/dir")

	var plan api.Plan
	if err := json.Unmarshal([]byte(e.Must("plan", "all", "--what-if", "tasks=1", "--json")), &plan); err != nil {
		t.Fatal(err)
	}
	if plan.VMs != 6 || len(plan.Scenarios) != 2 || plan.WindowSeconds != 86400 || plan.Mode != "incremental" {
		t.Fatalf("plan: %+v", plan)
	}
	base, serial := plan.Scenarios[0], plan.Scenarios[1]
	// Recorded costs and measured rates: the six VMs take time, and one
	// at a time takes longer than two per datastore. The chance to end
	// within the day's window is nearly 1, not 1: it also reads the
	// planner's record (measured ÷ predicted of the two recorded runs,
	// plan.ApplyRecord), whose spread is wide on a loaded machine (0.99
	// was seen under CI's load).
	if base.P50Seconds <= 0 || serial.Name != "tasks=1" || serial.P50Seconds <= base.P50Seconds || base.InWindow < 0.9 {
		t.Errorf("as configured %+v, tasks=1 %+v", base, serial)
	}
	measured := strings.Join(plan.Measurements, "\n")
	if !strings.Contains(measured, "datastore:lab/ds-001") || !strings.Contains(measured, "pipeline:") {
		t.Errorf("measurements:\n%s", measured)
	}
	// Every VM has recorded snapshots and setups: none is assumed.
	for _, a := range plan.Assumptions {
		if strings.HasPrefix(a, "snapshot") || strings.HasPrefix(a, "disk setup") || strings.Contains(a, "pipeline") {
			t.Errorf("assumed although recorded or measured: %s", a)
		}
	}
	// The capacity forecast, from the two runs' new and zero bytes.
	c := plan.Capacity
	if c.UsedBytes <= 0 || c.Reduction <= 0 || c.PeakBytes <= 0 || c.Repository.Name != "default" || c.Repository.FreeBytes <= 0 ||
		len(c.Repository.Policies) != 1 || c.Retention != "keep everything" || len(c.Curve) == 0 {
		t.Errorf("capacity %+v", c)
	}
	// Capacity under the what-ifs: a limit changes how a run goes, not
	// what is kept; twice the VMs keep about twice as much.
	if base.Capacity.PeakBytes != c.PeakBytes || base.Capacity.VMs != 6 || serial.Capacity != base.Capacity || base.Capacity.Error != "" {
		t.Errorf("capacity as configured %+v, with tasks=1 %+v, forecast %d", base.Capacity, serial.Capacity, c.PeakBytes)
	}
	var doubled api.Plan
	if err := json.Unmarshal([]byte(e.Must("plan", "all", "--what-if", "add-vms=6", "--json")), &doubled); err != nil {
		t.Fatal(err)
	}
	if d := doubled.Scenarios[1].Capacity; d.VMs != 12 || d.PeakBytes < c.PeakBytes*18/10 || d.PeakBytes > c.PeakBytes*22/10 ||
		d.RepositoryPeakBytes != d.PeakBytes || d.Full == "" {
		t.Errorf("capacity with add-vms=6: %+v, as configured %d bytes", d, c.PeakBytes)
	}
	text := e.Must("plan", "all", "--what-if", "add-vms=6")
	for _, want := range []string{"policy all: incremental run of 6 VMs", "SCENARIO", "as configured", "add-vms=6", "critical path:", "assumptions:",
		"KEPT AT PEAK", "capacity: 12 VMs keep"} {
		if !strings.Contains(text, want) {
			t.Errorf("plan output lacks %q:\n%s", want, text)
		}
	}
	// Each run recorded its prediction as it started: the planner held to
	// its record.
	var acc api.PlanAccuracy
	if err := json.Unmarshal([]byte(e.Must("plan", "accuracy", "all", "--json")), &acc); err != nil {
		t.Fatal(err)
	}
	if len(acc.Runs) != 2 || acc.Runs[0].P50Seconds <= 0 || acc.Runs[0].MeasuredSeconds <= 0 || acc.Runs[0].VMs != 6 || acc.Runs[0].JobID <= acc.Runs[1].JobID ||
		acc.Runs[0].Error != acc.Runs[0].MeasuredSeconds/acc.Runs[0].P50Seconds-1 {
		t.Errorf("accuracy: %+v", acc)
	}
	if out := e.Must("plan", "accuracy", "all"); !strings.Contains(out, "policy all, 2 runs: mean absolute error") {
		t.Errorf("plan accuracy:\n%s", out)
	}
	e.Expect(command.ExitUsage, "plan", "accuracy", "nope")
	e.Expect(command.ExitUsage, "plan", "all", "--what-if", "speed=9")
	e.Expect(command.ExitUsage, "plan", "nope")
}
