package plan

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/coffer-backup/coffer/internal/policy"
)

// AssumedSchedule is the cadence a policy without a schedule is
// forecast at: one run a day, at midnight.
const AssumedSchedule = "@daily"

// CapacitySources are what a policy's forecast is made of.
type CapacitySources struct {
	Policy  policy.Policy
	Targets []Target
	History *History // nil: no recorded run
	// First is the policy's first recorded run (zero: none).
	First     time.Time
	Now       time.Time
	Location  *time.Location
	ChunkSize int
}

// BuildCapacity turns the sources into the forecast's input, and lists
// the assumptions made where a VM's history is missing: the VM's own
// figure, else the policy's mean over the VMs that have it, else a
// constant, as the run's prediction does.
func BuildCapacity(s CapacitySources) (CapacityInput, []string) {
	as := assumptions{}
	in := CapacityInput{Retention: s.Policy.Retention, ImmutableFor: time.Duration(s.Policy.ImmutableFor), First: s.First,
		Now: s.Now, Location: s.Location, ChunkSize: s.ChunkSize}
	sc, err := s.Policy.ParseSchedule()
	if err != nil || sc == nil {
		sc, _ = cron.ParseStandard(AssumedSchedule)
		as.add("no schedule: one run a day assumed", 0)
	}
	in.Schedule = sc
	if s.Policy.Retention.Empty() {
		as.add("no retention: every point is kept, the repository grows for ever", 0)
	}
	hist := s.History
	if hist == nil {
		hist = &History{VMs: map[string]*VMHistory{}}
	}
	// The policy's means: change as a share of used, and reduction.
	var share, reduction float64
	var nShare, nReduction int
	for _, h := range hist.VMs {
		if st := h.Storage; st.ChangeFrom != "" && st.Used > 0 {
			share += st.Change / float64(st.Used)
			nShare++
		}
		if h.Storage.Reduction > 0 {
			reduction += h.Storage.Reduction
			nReduction++
		}
	}
	for _, tg := range s.Targets {
		var st StorageHistory
		if h := hist.VMs[VMKey(tg.Connection, tg.VM.ID)]; h != nil {
			st = h.Storage
		}
		v := CapacityVM{Used: float64(st.Used), Change: st.Change, Reduction: st.Reduction}
		switch st.UsedFrom {
		case UsedRecorded:
		case UsedFullRead:
			as.add("used bytes: what the newest full read (zeros not recorded)", 1)
		case UsedDisks:
			as.add("used bytes: the disks' whole size (neither zeros nor a full recorded)", 1)
		default:
			v.Used = float64(tg.VM.ProvisionedBytes())
			as.add("used bytes: the disks' provisioned size (no run recorded)", 1)
		}
		switch {
		case st.ChangeFrom == FromNew:
		case st.ChangeFrom == FromRead:
			as.add("change per run: what incrementals and differentials read (new bytes not recorded)", 1)
		case nShare > 0:
			v.Change = v.Used * share / float64(nShare)
			as.add(fmt.Sprintf("change per run: the policy's mean of %.2f%% of used bytes (none of their own recorded)", 100*share/float64(nShare)), 1)
		default:
			v.Change = v.Used * AssumedChangeRate
			as.add(fmt.Sprintf("change per run: %.0f%% of used bytes (none recorded: a VM's first run stores it whole)", 100*AssumedChangeRate), 1)
		}
		switch {
		case st.ReductionFrom == FromNew:
		case st.ReductionFrom == FromRead:
			as.add("reduction: bytes stored per byte read (new bytes not recorded)", 1)
		case nReduction > 0:
			v.Reduction = reduction / float64(nReduction)
			as.add(fmt.Sprintf("reduction: the policy's mean of %.2f (none of their own recorded)", v.Reduction), 1)
		default:
			v.Reduction = AssumedStoredRatio
			as.add(fmt.Sprintf("reduction %.2f (no run recorded)", AssumedStoredRatio), 1)
		}
		in.VMs = append(in.VMs, v)
	}
	return in, as.list()
}
