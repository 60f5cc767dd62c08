package vsstandby

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// Failover makes the standby called name (marked mark) the running VM
// from its point seq (0: the newest): the failover's record is set on the
// VM first, then the VM reverts to the point, its network adapters are set
// to connect at power-on, and it powers on. From then on runs refuse the
// standby. A failover killed midway is finished by the next one (the
// revert is not done twice: the VM may have run since); one onto a
// standby that runs is refused.
func Failover(ctx context.Context, c *vim25.Client, name, mark string, seq int, now time.Time) (Point, error) {
	return failOver(ctx, c, name, mark, seq, now, false)
}

// failOver is Failover; planned records that the point equals the
// shut-down source (a planned failover's), which its failback relies on.
func failOver(ctx context.Context, c *vim25.Client, name, mark string, seq int, now time.Time, planned bool) (Point, error) {
	sb, err := findStandby(ctx, c, name)
	if err != nil {
		return Point{}, err
	}
	if sb == nil {
		return Point{}, fmt.Errorf("no standby VM %s (run the replication first): %w", name, hypervisor.ErrNotFound)
	}
	if sb.mark != mark {
		return Point{}, fmt.Errorf("%w: %s carries the mark %q, not %q", ErrNotStandby, name, sb.mark, mark)
	}
	running := sb.vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOff
	fo := sb.failover
	switch {
	case fo != nil && running:
		return Point{}, fmt.Errorf("%w: %s runs from point %d since %s", ErrFailedOver, name, fo.Seq, fo.At.Format(time.RFC3339))
	case running:
		return Point{}, fmt.Errorf("the standby %s is %s outside a failover: power it off first", name, sb.vm.Runtime.PowerState)
	}
	ps, err := points(sb.vm)
	if err != nil {
		return Point{}, err
	}
	if fo == nil {
		fo = &failedOver{Seq: seq, At: now.UTC(), Planned: planned}
		if seq == 0 && len(ps) > 0 {
			fo.Seq = ps[len(ps)-1].Seq
		}
	}
	pt, err := pointOf(ps, fo.Seq)
	if err != nil {
		return Point{}, fmt.Errorf("standby %s: %w", name, err)
	}
	if err := recordFailover(ctx, c, sb.ref, fo); err != nil {
		return Point{}, err
	}
	if !fo.Reverted {
		if err := revert(ctx, c, pt); err != nil {
			return Point{}, err
		}
		fo.Reverted = true
		if err := recordFailover(ctx, c, sb.ref, fo); err != nil {
			return Point{}, err
		}
	}
	if sb, err = loadStandby(ctx, c, sb.ref); err != nil {
		return Point{}, err
	}
	if err := reconfigure(ctx, c, sb.ref, types.VirtualMachineConfigSpec{DeviceChange: connectAtPowerOn(sb.vm.Config.Hardware.Device, true)}); err != nil {
		return Point{}, err
	}
	task, err := object.NewVirtualMachine(c, sb.ref).PowerOn(ctx)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		return Point{}, fmt.Errorf("power on the standby %s: %w", name, err)
	}
	return pt, nil
}

func pointOf(ps []Point, seq int) (Point, error) {
	for _, p := range ps {
		if p.Seq == seq {
			return p, nil
		}
	}
	return Point{}, fmt.Errorf("no restore point %d (the standby keeps %d)", seq, len(ps))
}

// Points lists the restore points of the standby called name.
func Points(ctx context.Context, c *vim25.Client, name string) ([]Point, error) {
	sb, err := findStandby(ctx, c, name)
	if err != nil {
		return nil, err
	}
	if sb == nil {
		return nil, fmt.Errorf("no standby VM %s: %w", name, hypervisor.ErrNotFound)
	}
	return points(sb.vm)
}

// networksExist fails for a mapped network the DR site lacks: a restore
// would leave its adapter out, a standby must not.
func networksExist(ctx context.Context, c *vim25.Client, cfg hypervisor.VMConfig) error {
	f := find.NewFinder(c, true)
	dcs, err := f.DatacenterList(ctx, "*")
	if err != nil {
		return err
	}
	var missing []error
	for _, n := range cfg.NICs {
		found := false
		for _, dc := range dcs {
			f.SetDatacenter(dc)
			if _, err := f.Network(ctx, n.Network); err == nil {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, fmt.Errorf("the networks map names %s, which the DR site does not have", n.Network))
		}
	}
	return errors.Join(missing...)
}
