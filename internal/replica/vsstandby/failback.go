package vsstandby

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// ErrNotFailedOver: a failback of a standby that is not failed over.
var ErrNotFailedOver = errors.New("the standby is not failed over")

// FailbackOptions say which failed-over standby goes back onto which VM.
type FailbackOptions struct {
	DR DiskConn
	// Original is the VM the standby kept; it must be powered off and
	// have no snapshots (its base disks are written).
	Original Source
	Name     string
	Mark     string
	StateDir string
	Step     StepFunc
}

// FailbackResult is what a failback read and wrote.
type FailbackResult struct {
	Point        Point
	BytesRead    int64
	BytesWritten int64
	Disks        int
}

// Failback moves a failed-over standby's VM back onto its original VM:
// the DR VM is powered off at once, each of its disks compared with the
// original's and only the blocks that differ (what the DR site changed,
// and after an unplanned failover what the source wrote after the point)
// written onto the original's disks (step failback). Then the standby is
// reverted to its newest point, its adapters left unconnected at
// power-on, and its failover record cleared, so the replication follows
// the original again; the original powers on (step switch-back). The
// record notes when the copy is done: a failback killed before that
// copies again, one killed after only finishes the switch.
func Failback(ctx context.Context, o FailbackOptions) (*FailbackResult, error) {
	if o.Step == nil {
		o.Step = func(string, time.Time, error, string) {}
	}
	c := o.DR.Client()
	sb, err := findStandby(ctx, c, o.Name)
	switch {
	case err != nil:
		return nil, err
	case sb == nil:
		return nil, fmt.Errorf("no standby VM %s: %w", o.Name, hypervisor.ErrNotFound)
	case sb.mark != o.Mark:
		return nil, fmt.Errorf("%w: %s carries the mark %q, not %q", ErrNotStandby, o.Name, sb.mark, o.Mark)
	case sb.failover == nil:
		return nil, fmt.Errorf("%w: %s", ErrNotFailedOver, o.Name)
	}
	ps, err := points(sb.vm)
	if err != nil {
		return nil, err
	}
	pt, err := pointOf(ps, sb.failover.Seq)
	if err != nil {
		return nil, fmt.Errorf("standby %s: %w", o.Name, err)
	}
	orig, err := originalOff(ctx, o.Original)
	if err != nil {
		return nil, err
	}
	res := &FailbackResult{Point: pt, Disks: len(pt.Devices)}
	if !sb.failover.WrittenBack {
		began := time.Now()
		err := writeBack(ctx, o, sb, orig, pt, res)
		o.Step("failback", began, err, fmt.Sprintf("%d bytes written of %d read (%d disks compared)", res.BytesWritten, res.BytesRead, res.Disks))
		if err != nil {
			return res, err
		}
	}
	began := time.Now()
	err = switchBack(ctx, o, sb.ref, ps)
	o.Step("switch-back", began, err, "the standby is at its newest point again, powered off; the original VM powers on")
	return res, err
}

// originalOff reads the original VM's disks, refusing one that runs or
// has snapshots (its current disks are deltas then).
func originalOff(ctx context.Context, s Source) (mo.VirtualMachine, error) {
	var vm mo.VirtualMachine
	if err := property.DefaultCollector(s.Conn.Client()).RetrieveOne(ctx, s.ref(), []string{"name", "runtime.powerState", "snapshot", "config.hardware.device"}, &vm); err != nil {
		return vm, fmt.Errorf("the original VM %s: %w", s.VM, err)
	}
	if vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOff {
		return vm, fmt.Errorf("the original VM %s is %s: coffer never writes onto a running VM's disks; power it off first", vm.Name, vm.Runtime.PowerState)
	}
	if vm.Snapshot != nil {
		return vm, fmt.Errorf("the original VM %s has snapshots; remove them before a failback onto its disks: %w", vm.Name, hypervisor.ErrUnsupported)
	}
	if vm.Config == nil {
		return vm, fmt.Errorf("the original VM %s has no configuration", vm.Name)
	}
	return vm, nil
}

// writeBack powers the DR VM off and writes what differs onto the
// original's disks, then notes it in the failover record.
func writeBack(ctx context.Context, o FailbackOptions, sb *standbyVM, orig mo.VirtualMachine, pt Point, res *FailbackResult) error {
	c := o.DR.Client()
	if err := powerOff(ctx, c, sb.ref, sb.vm.Runtime.PowerState); err != nil {
		return fmt.Errorf("power off the DR VM %s: %w", o.Name, err)
	}
	journal := filepath.Join(o.StateDir, "vsstandby-failback", o.Original.VM)
	for key, dev := range pt.Devices {
		to, from, size, err := diskPair(o.Original.Conn, o.Original.VM, orig.Config.Hardware.Device, key, disk{conn: o.DR, vm: sb.ref.Value}, sb.vm.Config.Hardware.Device, dev)
		if err != nil {
			return err
		}
		st, err := copyChanged(ctx, from, to, size, journal)
		res.BytesRead += st.Read
		res.BytesWritten += st.Written
		if err != nil {
			return fmt.Errorf("disk %s: %w", key, err)
		}
	}
	fo := *sb.failover
	fo.WrittenBack = true
	return recordFailover(ctx, c, sb.ref, &fo)
}

// switchBack reverts the standby to its newest point (what the DR VM
// wrote is on the original now), disconnects its adapters at power-on,
// clears its failover record, and powers the original on.
func switchBack(ctx context.Context, o FailbackOptions, ref types.ManagedObjectReference, ps []Point) error {
	c := o.DR.Client()
	if len(ps) > 0 {
		if err := revert(ctx, c, ps[len(ps)-1]); err != nil {
			return err
		}
	}
	sb, err := loadStandby(ctx, c, ref)
	if err != nil {
		return err
	}
	if err := reconfigure(ctx, c, ref, types.VirtualMachineConfigSpec{DeviceChange: connectAtPowerOn(sb.vm.Config.Hardware.Device, false)}); err != nil {
		return err
	}
	if err := recordFailover(ctx, c, ref, nil); err != nil {
		return err
	}
	if err := powerOn(ctx, o.Original.Conn.Client(), o.Original.ref()); err != nil {
		return fmt.Errorf("power on the original VM %s: %w", o.Original.VM, err)
	}
	return nil
}
