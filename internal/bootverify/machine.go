package bootverify

import (
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/repo"
)

// machine is how a point's VM starts under QEMU: a QEMU point from its
// recorded command line, a vSphere point from its recorded virtual
// hardware mapped to QEMU's devices (vsphere.go).
type machine struct {
	// args is the command line for spec, in RelaunchArgs' form.
	args func(spec qemu.LaunchSpec) ([]string, error)
	// nic is the probes' adapter model ("" for virtio-net-pci).
	nic string
	// evidence describes the machine in step 1.
	evidence map[string]string
	// noAgent is why step 4 is skipped when the VM has no agent channel.
	noAgent string
}

// qemuMachine relaunches a QEMU point's VM as recorded.
func qemuMachine(cfg hypervisor.VMConfig) (machine, error) {
	if err := qemu.Relaunchable(cfg.Native); err != nil {
		return machine{}, err
	}
	return machine{args: func(spec qemu.LaunchSpec) ([]string, error) {
		rl, err := qemu.RelaunchArgs(cfg.Native, spec)
		if err != nil {
			return nil, err
		}
		return rl.Args, nil
	}}, nil
}

// unverifiable is the result of a point that cannot boot here as its own
// hypervisor boots it: step 1 fails with the reason, nothing is started.
func unverifiable(snap *repo.Point, cfg hypervisor.VMConfig, cv *CannotVerifyError) *Result {
	res := &Result{PointID: snap.ID.String(), VM: cfg.Name, Started: time.Now().UTC(), CannotVerify: cv.Reason,
		Steps: []Step{{Number: StepStart, Name: stepNames[StepStart], Status: Failed, Detail: cv.Error(),
			Evidence: map[string]string{"hypervisor": cfg.Kind}}}}
	for n := StepNoPanic; n <= StepScreenshot; n++ {
		res.Steps = append(res.Steps, Step{Number: n, Name: stepNames[n], Status: Skipped, Detail: "the VM cannot start under local QEMU"})
	}
	res.settle()
	return res
}
