// Package failover starts replicas (internal/replica's standbys) as
// running VMs, by failover plans: ordered groups of VMs, each group
// started once the previous one's probes passed and its delay is over.
//
//   - A test failover (Rehearse) starts every VM of the plan on a new
//     qcow2 overlay above the chosen restore point, in a run directory of
//     its own, each on an isolated network (QEMU's user-mode network with
//     restrict=on: the guest reaches nothing, the host reaches only the
//     probes' forwarded ports). It reports each step's time and each
//     probe's result, then stops every VM and removes the run directory:
//     the standbys are only read.
//   - A failover (Failover) makes one standby the running VM: the record
//     notes it first (replica.State.FailedOver, so no replication writes
//     onto the standby again), then a writable overlay per disk above the
//     chosen point, then QEMU on its mapped networks; for a standby kept
//     as a libvirt domain (VM.Domain), the overlays are the files its
//     disks name and the domain starts through libvirt.
//   - A failback (Failback) stops the DR VM and writes back onto the
//     original VM's disks what changed at the DR site: after a planned
//     failover only the clusters the DR overlay holds (what the DR VM
//     wrote), after an unplanned one every block that differs.
package failover

import (
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/bootverify"
)

// VM is one VM of a plan: its standby's directory and what to run.
type VM struct {
	Name string
	// Dir is the standby's directory (replica.json, standby.json).
	Dir string
	// Address is where the probes reach the VM after a real failover
	// ("" : the probes of tcp and http kinds cannot run, exec still can).
	Address   string
	CloudInit string
	// AgentAddress (CIDR) is given to the VM's first interface through its
	// guest agent once it started, with a default route through
	// AgentGateway when set (a Linux guest's `ip`).
	AgentAddress string
	AgentGateway string
	Readdress    string
	Script       string
	// Domain is the standby as a domain of the DR host's hypervisor
	// (libvirt); nil for a standby that fails over as a QEMU of coffer's.
	Domain StandbyDomain
	// Copies starts a test failover's copy of such a standby on its
	// hypervisor (nil: a test failover starts a QEMU of coffer's).
	Copies DomainCopies
	// Remote is the standby as a VM its DR site's hypervisor keeps and
	// starts (vSphere); nil for a standby in Dir.
	Remote RemoteStandby
}

// Group is VMs started together, then probed, then waited on.
type Group struct {
	VMs          []VM
	Probes       []bootverify.Probe
	ProbeTimeout time.Duration
	Delay        time.Duration
}

// Plan is a failover plan resolved to standbys.
type Plan struct {
	Name   string
	Groups []Group
}

// Step is one timed step of a run.
type Step struct {
	Group    int           `json:"group"`
	VM       string        `json:"vm,omitempty"`
	Name     string        `json:"name"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration_ns"`
	Error    string        `json:"error,omitempty"`
	Detail   string        `json:"detail,omitempty"`
}

// ProbeResult is one probe of one VM.
type ProbeResult struct {
	Group    int           `json:"group"`
	VM       string        `json:"vm"`
	Probe    string        `json:"probe"`
	Passed   bool          `json:"passed"`
	Evidence string        `json:"evidence,omitempty"`
	Error    string        `json:"error,omitempty"`
	Duration time.Duration `json:"duration_ns"`
}

// Report is what a run of a plan did.
type Report struct {
	Plan     string        `json:"plan"`
	Test     bool          `json:"test"`
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration_ns"`
	Steps    []Step        `json:"steps"`
	Probes   []ProbeResult `json:"probes"`
	// Passed says every VM started and every probe passed.
	Passed bool `json:"passed"`

	watch Watcher
}

// Watcher hears of each step and probe of a run as it ends, so that a
// job's log follows the run live rather than at its end.
type Watcher interface {
	Step(Step)
	Probe(ProbeResult)
}

// A Report is written by its run's goroutine only: the starts of a
// group, which run at once, keep their steps aside (stepBuf) and the run
// adds them in plan order (startGroup).
func (r *Report) step(group int, vm, name string, began time.Time, err error, detail string) {
	r.add(newStep(group, vm, name, began, err, detail))
}

func newStep(group int, vm, name string, began time.Time, err error, detail string) Step {
	s := Step{Group: group, VM: vm, Name: name, Started: began, Duration: time.Since(began), Detail: detail}
	if err != nil {
		s.Error = err.Error()
	}
	return s
}

func (r *Report) add(steps ...Step) {
	r.Steps = append(r.Steps, steps...)
	if r.watch != nil {
		for _, s := range steps {
			r.watch.Step(s)
		}
	}
}

func (r *Report) probe(p ProbeResult) {
	r.Probes = append(r.Probes, p)
	if r.watch != nil {
		r.watch.Probe(p)
	}
}

// pick is the standby point of seq (0: the newest).
func pick(vm VM, seq int, points []pointRef) (pointRef, error) {
	if len(points) == 0 {
		return pointRef{}, fmt.Errorf("the standby of %s in %s has no restore point yet", vm.Name, vm.Dir)
	}
	if seq == 0 {
		return points[len(points)-1], nil
	}
	for _, p := range points {
		if p.seq == seq {
			return p, nil
		}
	}
	return pointRef{}, fmt.Errorf("the standby of %s has no restore point %d (coffer replicas points)", vm.Name, seq)
}

// pointRef is a restore point's sequence number and disk files.
type pointRef struct {
	seq         int
	backupPoint string
	disks       map[string]string // key -> overlay file of the point
}
