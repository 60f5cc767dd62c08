package plan

import (
	"fmt"
	"sort"
	"strings"
)

// The sizing rules of the seed documents (Data Protector's VMware
// guide), checked against the limits a run would use.
const (
	MaxSnapshotsPerDatastore = 8 // concurrent snapshots on one datastore
	MaxStreamsPerController  = 4 // concurrent streams on one storage controller (a resource group)
	MaxMultiplexing          = 4 // concurrent VM streams into one target device
	// VolumeOverhead is the share of a volume's queue depth kept for
	// overhead: VMs per volume = queue depth ÷ active commands per VM ×
	// (1 − 25%).
	VolumeOverhead = 0.25
)

// Volume is what the queue-depth rule needs of a datastore: the LUN's
// queue depth and the active commands per VM (measured, e.g. esxtop's
// ACTV).
type Volume struct {
	QueueDepth    int
	CommandsPerVM float64
}

// RuleInput is what the rules are checked against.
type RuleInput struct {
	// Pools are the limits' capacities by pool key (0: unlimited), and
	// Peaks the slots a predicted run used at most (for unlimited
	// pools, what the run would reach).
	Pools map[string]int
	Peaks map[string]int
	// TargetDevices is the number of devices behind each repository
	// ("repo:NAME"; 1 when not given): its streams divided by them is
	// the multiplexing factor.
	TargetDevices map[string]int
	// VMsPerDatastore counts the VMs on each datastore pool key;
	// Volumes gives the queue-depth rule's figures for some of them.
	VMsPerDatastore map[string]int
	Volumes         map[string]Volume
}

// Violation is one rule broken.
type Violation struct {
	Rule     string
	Resource string
	Value    string
	Limit    string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: %s is %s, the rule is %s", v.Rule, v.Resource, v.Value, v.Limit)
}

// CheckRules lists the rules the limits break, by resource.
func CheckRules(in RuleInput) []Violation {
	var out []Violation
	for key, cap := range in.Pools {
		n := cap
		if n <= 0 {
			n = in.Peaks[key] // unlimited: what the run would reach
		}
		switch {
		case strings.HasPrefix(key, "datastore:") && n > MaxSnapshotsPerDatastore:
			out = append(out, Violation{"snapshots per datastore", key, limitText(cap, n), fmt.Sprintf("at most %d", MaxSnapshotsPerDatastore)})
		case strings.HasPrefix(key, "group:") && n > MaxStreamsPerController:
			out = append(out, Violation{"streams per controller group", key, limitText(cap, n), fmt.Sprintf("at most %d", MaxStreamsPerController)})
		case strings.HasPrefix(key, "repo:"):
			devices := max(in.TargetDevices[key], 1)
			if float64(n)/float64(devices) > MaxMultiplexing {
				out = append(out, Violation{"multiplexing", key, fmt.Sprintf("%s streams on %d target device(s), %.1f:1", limitText(cap, n), devices, float64(n)/float64(devices)),
					fmt.Sprintf("at most %d:1", MaxMultiplexing)})
			}
		}
	}
	for key, v := range in.Volumes {
		if v.QueueDepth <= 0 || v.CommandsPerVM <= 0 {
			continue
		}
		most := int(float64(v.QueueDepth) / v.CommandsPerVM * (1 - VolumeOverhead))
		if n := in.VMsPerDatastore[key]; n > most {
			out = append(out, Violation{"VMs per volume", key, counted(n, "VM"),
				fmt.Sprintf("at most %d (queue depth %d ÷ %g active commands per VM, less %.0f%%)", most, v.QueueDepth, v.CommandsPerVM, 100*VolumeOverhead)})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Rule != out[j].Rule {
			return out[i].Rule < out[j].Rule
		}
		return out[i].Resource < out[j].Resource
	})
	return out
}

func limitText(cap, n int) string {
	if cap <= 0 {
		return fmt.Sprintf("unlimited (%d in the predicted run)", n)
	}
	return fmt.Sprint(cap)
}
