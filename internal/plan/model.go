// Package plan predicts how long a policy's run will take under the
// engine's limits, and why: a discrete-event simulation on a virtual
// clock of the engine's scheduling (the same slot pools, from
// engine.SlotNeeds, the same queue order, the same rule for starting what
// fits), with per-VM fixed costs and transfers at the rate of the slowest
// device on each VM's path, repeated over the measured variance (Monte
// Carlo) to give a P50 and a P90 window.
//
// The model of one VM task, in the engine's order:
//
//	queued → snapshot (create, with quiesce) → setup (NBD or session) → transfer → other → release (snapshot remove) → done
//
// The fixed costs grow with the tasks in flight (growth.go), shared like
// a processor whose rate changes as tasks start and end (shared.go), and a
// factor drawn once per simulated run moves all of a run's costs together,
// so that the P90 covers run-to-run variation and not only per-VM
// variance.
//
// The task holds its slots from the snapshot until the release is done,
// as the engine does. A transfer reads Bytes at the smallest of: the
// per-task rate (limits.task-rate), and each bandwidth it crosses (its
// datastores' read rate, the repository's write rate, coffer's pipeline,
// limits.rate) divided equally among the transfers crossing it; a VM
// whose devices were not measured may instead take the transfer time it
// was recorded with. "Other" is the rest of a recorded attempt (the
// engine's and the repository's own work per VM). What the model leaves
// out: retries, failures, storage-level (group) batches.
package plan

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/coffer-backup/coffer/internal/engine"
)

// Dist is a measured quantity: its mean and standard deviation (0: a
// fixed value). It is sampled as a log-normal of that mean and
// deviation, because durations and sizes are positive and skewed to the
// right (a few slow snapshots, a few busy VMs).
type Dist struct {
	Mean, StdDev float64
}

// Fixed is a Dist without variance.
func Fixed(v float64) Dist { return Dist{Mean: v} }

func (d Dist) sample(r *rand.Rand) float64 {
	if d.Mean <= 0 {
		return 0
	}
	if d.StdDev <= 0 || r == nil {
		return d.Mean
	}
	s2 := math.Log1p(d.StdDev * d.StdDev / (d.Mean * d.Mean))
	return math.Exp(math.Log(d.Mean) - s2/2 + math.Sqrt(s2)*r.NormFloat64())
}

// Crossing is a bandwidth a transfer crosses: the device's key and the
// bytes it moves there per byte read (1 for a read; the stored ratio,
// after dedup and compression, for the repository's writes).
type Crossing struct {
	Device string
	Factor float64
}

// Task is one VM of the run.
type Task struct {
	Name string
	// Size is the engine's size estimate (provisioned bytes): the queue
	// is ordered by it, longest first, then by position.
	Size int64
	// Pools are the slots the VM needs besides the global pool
	// (engine.SlotNeeds).
	Pools []engine.SlotNeed
	// Route is what the VM needs of a worker (engine.RouteOf), with
	// Input.Workers.
	Route engine.Route
	// Fixed costs, in seconds.
	Snapshot, Setup, Other, Release Dist
	// Bytes is what the run reads from the VM's disks, at the rates of
	// Path; a Transfer time, when set, is taken instead (seconds).
	Bytes    Dist
	Transfer Dist
	// Path lists the bandwidths the read crosses.
	Path []Crossing
	// Load is the concurrency the fixed costs are given at, and
	// TransferLoad the recorded Transfer's: with Input.Growth and
	// Input.TransferGrowth they are taken from it to one in flight and
	// shared with the tasks in flight as their number changes
	// (shared.go). BuildInput gives 1 for both, the
	// history's costs being a VM's alone (normalise.go). 0: used as
	// they are.
	Load, TransferLoad float64
}

// Input is one policy's run to predict.
type Input struct {
	Tasks []Task
	// Concurrency is the global pool's capacity (limits.tasks).
	Concurrency int
	// Workers, when given, are the data movers the tasks are placed on,
	// as the engine's dispatcher places them (workers.go); none: one
	// process runs everything.
	Workers []engine.Worker
	// TaskRate caps each transfer, in bytes/s (limits.task-rate; 0: none).
	TaskRate float64
	// Devices are the bandwidths in bytes/s by key, as Task.Path names
	// them; a device without a rate does not limit.
	Devices map[string]float64
	// Growth scales each task's fixed costs from its Load to the tasks
	// in flight, re-rated whenever their number changes (shared.go; the
	// zero value: no scaling).
	Growth CostGrowth
	// TransferGrowth scales a recorded transfer time (Task.Transfer) the
	// same way; transfers at rates share their devices instead.
	TransferGrowth CostGrowth
	// RunSpread is the standard deviation of the log of a factor drawn
	// once per simulated run and applied to all its fixed costs, and
	// TransferSpread the same for its recorded transfers (one normal
	// draw for both: what moves a whole run at once, the machine's load
	// or a busy management plane, moves both), which per-VM variance
	// averages away over a large fleet. 0: none.
	RunSpread, TransferSpread float64
	// Window is the time the run must end within (0: none).
	Window time.Duration
	// Runs is the number of Monte Carlo runs (0: DefaultRuns); a run
	// whose tasks have no variance is run once.
	Runs int
	Seed uint64
	// Record is the planner's record of past runs, which widens the P90
	// (record.go); empty: the P90 is the simulation's.
	Record Record
}
