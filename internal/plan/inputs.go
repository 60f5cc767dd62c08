package plan

import (
	"fmt"
	"sort"
	"time"

	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/procs"
)

// What the planner assumes where nothing was measured; each use is
// reported with the number of VMs concerned.
const (
	// AssumedSnapshotSeconds and AssumedReleaseSeconds are a snapshot
	// create (with quiesce) and remove on a real hypervisor, of the
	// order vSphere takes (vcsim's benchmark uses 0.5 s; real ESXi takes
	// seconds).
	AssumedSnapshotSeconds = 5.0
	AssumedReleaseSeconds  = 5.0
	AssumedSetupSeconds    = 1.0
	// AssumedChangeRate is the share of a VM's disks an incremental run
	// reads when none was recorded.
	AssumedChangeRate = 0.05
	// AssumedStoredRatio is the bytes stored per byte read when no run
	// was recorded: zstd SpeedFastest's 0.465 on OS data
	// (performance anchors), rounded.
	AssumedStoredRatio = 0.5
	// AssumedPipelinePerCore is coffer's pipeline in bytes/s per core on
	// compressible data (SHA-256, zstd SpeedFastest, AES-GCM: 2.7 ms/MB,
	// performance anchors §3), when `coffer bench pipeline` was not run.
	AssumedPipelinePerCore = 375e6
)

// PipelineDevice is the device key of coffer's own pipeline (its CPU),
// which every transfer crosses; RateDevice is limits.rate.
const (
	PipelineDevice = "pipeline"
	RateDevice     = "rate"
)

// Target is a VM the policy selects, on its connection.
type Target struct {
	Connection string
	VM         hypervisor.VM
}

// Measurements are the rates `coffer bench` measured, in bytes/s.
type Measurements struct {
	// Devices by device key: "datastore:CONN/DS" (full-duplex read of a
	// source datastore), "repo:NAME" (write of a repository's target).
	Devices map[string]float64
	// Pipeline is coffer's pipeline on this machine, all cores, at the
	// compression level in use.
	Pipeline float64
}

// Sources are what a plan is made of.
type Sources struct {
	Config   *policy.Config
	Policy   policy.Policy
	Targets  []Target
	History  *History // nil: no recorded run
	Measured Measurements
	// Mode is the run to plan: "full", "incremental" or "differential";
	// "" plans the policy's mode.
	Mode   string
	Window time.Duration
	// Workers, when given, are the data movers the run is placed on
	// (Input.Workers); none: one process runs it all.
	Workers []engine.Worker
}

// BuildInput turns the sources into the simulation's input, and lists
// the assumptions it made where a measurement was missing.
func BuildInput(s Sources) (Input, []string) {
	cfg := s.Config
	if cfg == nil {
		cfg = &policy.Config{}
	}
	limits := cfg.Limits.WithDefaults()
	mode := s.Mode
	if mode == "" {
		mode = s.Policy.Mode
	}
	if mode == "" {
		mode = "incremental"
	}
	hist := s.History
	if hist == nil {
		hist = &History{VMs: map[string]*VMHistory{}}
	}
	fleet := fleetMeans(hist)
	perByteTransfer, share := transferPerByte(hist), readShare(hist)
	as := assumptions{}
	in := Input{Concurrency: limits.Tasks, TaskRate: float64(limits.TaskRate), Devices: map[string]float64{}, Window: s.Window, Workers: s.Workers}
	// How costs grow with concurrency, and how much whole runs move.
	fixedFit, fixedErr := hist.CostGrowth()
	inFlight := fleetInFlight(limits.Tasks, len(s.Targets))
	transferFit, transferErr := hist.TransferGrowth()
	if fixedErr == nil {
		in.Growth, in.RunSpread = fixedFit, fixedFit.Spread
		describeGrowth(fixedFit, "fixed costs", limits.Tasks, inFlight, as)
	}
	recordedTransfers := 0
	for k, v := range s.Measured.Devices {
		in.Devices[k] = v
	}
	in.Devices[PipelineDevice] = s.Measured.Pipeline
	if s.Measured.Pipeline <= 0 {
		in.Devices[PipelineDevice] = AssumedPipelinePerCore * float64(procs.Working())
		as.add(fmt.Sprintf("coffer's pipeline at %.0f MB/s per core × %d cores (performance anchors; run `coffer bench pipeline`)",
			AssumedPipelinePerCore/1e6, procs.Working()), 0)
	}
	if len(s.Workers) > 0 {
		as.add(fmt.Sprintf("%s, each with a pipeline of its own as fast as this machine's (%.0f MB/s)",
			counted(len(s.Workers), "worker"), in.Devices[PipelineDevice]/1e6), 0)
	}
	if limits.Rate > 0 {
		in.Devices[RateDevice] = float64(limits.Rate)
	}
	repoKey := "repo:" + s.Policy.Repository
	if _, ok := in.Devices[repoKey]; !ok {
		name := s.Policy.Repository
		if name == "" {
			name = "the default repository"
		}
		as.add(fmt.Sprintf("%s's writes not measured: not a limit (run `coffer bench device --as %s` on its target)", name, repoKey), 0)
	}
	unmeasured := map[string]bool{}
	for _, tg := range s.Targets {
		vm := tg.VM
		h := hist.VMs[VMKey(tg.Connection, vm.ID)]
		t := Task{Name: vm.Name, Size: vm.ProvisionedBytes(),
			Pools: engine.SlotNeeds(cfg, limits, s.Policy, tg.Connection, vm, true, true),
			Route: engine.RouteOf(cfg, s.Policy, tg.Connection, vm)}
		t.Snapshot = pick(h, func(h *VMHistory) Dist { return h.Snapshot }, fleet.Snapshot, AssumedSnapshotSeconds, "snapshot create", as)
		t.Setup = pick(h, func(h *VMHistory) Dist { return h.Setup }, fleet.Setup, AssumedSetupSeconds, "disk setup", as)
		t.Release = pick(h, func(h *VMHistory) Dist { return h.Release }, fleet.Release, AssumedReleaseSeconds, "snapshot remove", as)
		t.Other = pick(h, func(h *VMHistory) Dist { return h.Other }, fleet.Other, 0, "other per-VM work", as)
		t.Bytes = bytesOf(h, mode, vm, share, as)
		// The history's costs are the VM's alone (ReadHistory,
		// normalise.go): the growths scale them from one in flight.
		t.Load, t.TransferLoad = 1, 1
		ratio := AssumedStoredRatio
		if h != nil && h.StoredRatio > 0 {
			ratio = h.StoredRatio
		} else {
			as.add(fmt.Sprintf("stored ratio %.2f (bytes stored per byte read)", AssumedStoredRatio), 1)
		}
		t.Path = append(t.Path, Crossing{PipelineDevice, 1}, Crossing{RateDevice, 1}, Crossing{repoKey, ratio})
		measured := false
		for ds, share := range datastoreShares(vm) {
			key := "datastore:" + tg.Connection + "/" + ds
			t.Path = append(t.Path, Crossing{key, share})
			if _, ok := in.Devices[key]; !ok {
				unmeasured[key] = true
			} else {
				measured = true
			}
		}
		// Until a device on its path is measured, a VM's recorded
		// transfer time says more than bytes at assumed rates.
		if d, ok := h.transfer(mode); ok && !measured {
			t.Transfer = d
			recordedTransfers++
			as.add(fmt.Sprintf("transfer: the time recorded for the VM (%s, its datastores not measured)", mode), 1)
		} else if perByte := perByteTransfer[mode]; perByte > 0 && !measured && t.Bytes.Mean > 0 {
			// A VM never recorded moves its bytes as the policy's
			// recorded VMs did, not at rates nobody measured.
			t.Transfer = Dist{Mean: perByte * t.Bytes.Mean, StdDev: perByte * t.Bytes.StdDev}
			recordedTransfers++
			as.add(fmt.Sprintf("transfer: the policy's mean recorded time per byte read, %.3g s per MB (%s, no run of their own recorded, datastores not measured)",
				perByte*1e6, mode), 1)
		}
		in.Tasks = append(in.Tasks, t)
	}
	if recordedTransfers > 0 && transferErr == nil {
		in.TransferGrowth, in.TransferSpread = transferFit, transferFit.Spread
		describeGrowth(transferFit, "recorded transfer times", limits.Tasks, inFlight, as)
	}
	if len(unmeasured) > 0 {
		as.add(fmt.Sprintf("%s not measured: not a limit (run `coffer bench device`)", counted(len(unmeasured), "datastore")), 0)
	}
	return in, as.list()
}

// describeGrowth lists, among the assumptions, how a fitted growth (of
// the fixed costs or of recorded transfer times) is used, or why none
// is; what names the quantity, tasks is limits.tasks and inFlight the
// most VMs the fleet runs at once.
func describeGrowth(g CostGrowth, what string, tasks, inFlight int, as assumptions) {
	switch {
	case g.Grows():
		how := fmt.Sprintf("%s scaled to the tasks in flight: × (1 + σ(N−1) + κN(N−1)), σ %.4f, κ %.6f, fitted to %d runs at %.0f to %.0f in flight",
			what, g.Sigma, g.Kappa, g.Runs, g.MinLoad, g.MaxLoad)
		if float64(tasks) > g.MaxLoad*1.05 {
			how += fmt.Sprintf("; extrapolated to limits.tasks %d", tasks)
		}
		as.add(how, 0)
	case g.MaxLoad >= MinLoadSpan*g.MinLoad:
		as.add(fmt.Sprintf("%s as recorded at every concurrency: they did not grow over %d runs at %.0f to %.0f in flight", what, g.Runs, g.MinLoad, g.MaxLoad), 0)
	default:
		as.add(fmt.Sprintf("%s as recorded (at about %.0f in flight) at every concurrency: no growth fitted, %s at one concurrency (record runs at concurrencies at least %.0f× apart)",
			what, g.MaxLoad, recordedRuns(g.Runs, "is", "are"), MinLoadSpan), 0)
	}
	if g.Spread > 0 {
		as.add(fmt.Sprintf("run-to-run factor of the %s: ±%.0f%% (log-normal, from %d runs around the fit); at %d in flight ±%.0f%%, Student-t with %d degrees of freedom (one more run, from the fit's uncertainty there)",
			what, 100*g.Spread, g.Runs, inFlight, 100*g.PredictionSpread(float64(inFlight)), g.Dof()), 0)
	} else {
		as.add(fmt.Sprintf("no run-to-run factor of the %s: %s no spread around the fit (P90 from per-VM variance only)", what, recordedRuns(g.Runs, "leaves", "leave")), 0)
	}
}

// counted is "1 VM" or "3 VMs".
func counted(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// recordedRuns is "the 1 recorded run is" or "the 6 recorded runs are",
// with the verb given for each.
func recordedRuns(n int, one, many string) string {
	if n == 1 {
		return "the 1 recorded run " + one
	}
	return fmt.Sprintf("the %d recorded runs %s", n, many)
}

// pick is the VM's own measure, else the policy's mean over the VMs that
// have one, else the constant.
func pick(h *VMHistory, of func(*VMHistory) Dist, fleet Dist, constant float64, what string, as assumptions) Dist {
	if h != nil && of(h).Mean > 0 {
		return of(h)
	}
	if fleet.Mean > 0 {
		as.add(fmt.Sprintf("%s: the policy's mean of %.2f s (no run of their own recorded)", what, fleet.Mean), 1)
		return fleet
	}
	as.add(fmt.Sprintf("%s: %.0f s (no run recorded)", what, constant), 1)
	return Fixed(constant)
}

func bytesOf(h *VMHistory, mode string, vm hypervisor.VM, fleetShare map[string]float64, as assumptions) Dist {
	if h != nil {
		if d, ok := h.Bytes[mode]; ok {
			return d
		}
	}
	size := float64(vm.ProvisionedBytes())
	if h != nil && h.Logical > 0 {
		size = float64(h.Logical)
	}
	if share := fleetShare[mode]; share > 0 && mode == "full" {
		as.add(fmt.Sprintf("a full run reads %.0f%% of the disks, the policy's recorded full runs' mean (no full run of their own recorded)", 100*share), 1)
		return Fixed(size * share)
	}
	if mode == "full" {
		as.add("a full run reads the whole disks (no full run recorded)", 1)
		return Fixed(size)
	}
	as.add(fmt.Sprintf("an %s run reads %.0f%% of the disks (none recorded)", mode, 100*AssumedChangeRate), 1)
	return Fixed(size * AssumedChangeRate)
}

// readShare is, per mode, the share of their disks the policy's recorded
// VMs read in a run: Σ mean bytes read ÷ Σ disk bytes. BuildInput takes
// it for full runs only (a full read of thin disks reads what is
// allocated, not the whole size); an incremental's change is the VM's
// own.
func readShare(h *History) map[string]float64 {
	read, disks := map[string]float64{}, map[string]float64{}
	for _, v := range h.VMs {
		for mode, b := range v.Bytes {
			if v.Logical > 0 && b.Mean > 0 {
				read[mode] += b.Mean
				disks[mode] += float64(v.Logical)
			}
		}
	}
	out := map[string]float64{}
	for mode, r := range read {
		out[mode] = min(r/disks[mode], 1)
	}
	return out
}

// datastoreShares is the share of a VM's bytes on each of its datastores.
func datastoreShares(vm hypervisor.VM) map[string]float64 {
	out := map[string]float64{}
	total := float64(vm.ProvisionedBytes())
	for _, d := range vm.Disks {
		if d.Datastore != "" && total > 0 {
			out[d.Datastore] += float64(d.Size) / total
		}
	}
	if len(out) == 0 {
		for _, ds := range vm.Datastores {
			out[ds] = 1 / float64(len(vm.Datastores))
		}
	}
	return out
}

func (h *VMHistory) transfer(mode string) (Dist, bool) {
	if h == nil {
		return Dist{}, false
	}
	d, ok := h.Transfer[mode]
	return d, ok && d.Mean > 0
}

// fleetMeans averages the fixed costs over the VMs that have them.
func fleetMeans(h *History) VMHistory {
	var snap, setup, rel, other []float64
	for _, v := range h.VMs {
		if v.Snapshot.Mean > 0 {
			snap = append(snap, v.Snapshot.Mean)
		}
		if v.Setup.Mean > 0 {
			setup = append(setup, v.Setup.Mean)
		}
		if v.Release.Mean > 0 {
			rel = append(rel, v.Release.Mean)
		}
		if v.Other.Mean > 0 {
			other = append(other, v.Other.Mean)
		}
	}
	return VMHistory{Snapshot: distOf(snap), Setup: distOf(setup), Release: distOf(rel), Other: distOf(other)}
}

// transferPerByte is, per mode, the recorded transfer time per byte read
// over the VMs that have both: Σ mean time ÷ Σ mean bytes.
func transferPerByte(h *History) map[string]float64 {
	secs, bytes := map[string]float64{}, map[string]float64{}
	for _, v := range h.VMs {
		for mode, d := range v.Transfer {
			if b := v.Bytes[mode]; d.Mean > 0 && b.Mean > 0 {
				secs[mode] += d.Mean
				bytes[mode] += b.Mean
			}
		}
	}
	out := map[string]float64{}
	for mode, s := range secs {
		out[mode] = s / bytes[mode]
	}
	return out
}

// assumptions counts the VMs each assumption was used for.
type assumptions map[string]int

func (a assumptions) add(what string, vms int) { a[what] += vms }

func (a assumptions) list() []string {
	out := make([]string, 0, len(a))
	for what, n := range a {
		if n > 0 {
			what = fmt.Sprintf("%s: %s", what, counted(n, "VM"))
		}
		out = append(out, what)
	}
	sort.Strings(out)
	return out
}
