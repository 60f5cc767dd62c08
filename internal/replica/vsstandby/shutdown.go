package vsstandby

import (
	"context"
	"fmt"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// shutDown stops the VM ref for good before its last writes are read:
// a guest shutdown when its VMware Tools run (the guest flushes what it
// holds), waited for at most timeout, else (no Tools, or a guest that
// did not stop in time) a power-off. It says which it did.
func shutDown(ctx context.Context, c *vim25.Client, ref types.ManagedObjectReference, timeout time.Duration) (string, error) {
	var vm mo.VirtualMachine
	if err := property.DefaultCollector(c).RetrieveOne(ctx, ref, []string{"name", "runtime.powerState", "guest.toolsRunningStatus"}, &vm); err != nil {
		return "", err
	}
	if vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOff {
		return fmt.Sprintf("%s was powered off already", vm.Name), nil
	}
	v := object.NewVirtualMachine(c, ref)
	how := ""
	if vm.Guest != nil && vm.Guest.ToolsRunningStatus == string(types.VirtualMachineToolsRunningStatusGuestToolsRunning) &&
		vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn {
		err := v.ShutdownGuest(ctx)
		if err == nil {
			wctx, cancel := context.WithTimeout(ctx, timeout)
			err = v.WaitForPowerState(wctx, types.VirtualMachinePowerStatePoweredOff)
			cancel()
			if err == nil {
				return fmt.Sprintf("%s shut down by its guest (VMware Tools)", vm.Name), nil
			}
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		how = fmt.Sprintf("; its guest did not shut down within %s: %v", timeout, err)
	}
	task, err := v.PowerOff(ctx)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		return "", fmt.Errorf("power off %s: %w", vm.Name, err)
	}
	if how == "" {
		how = " (its VMware Tools do not run)"
	}
	return fmt.Sprintf("%s powered off%s", vm.Name, how), nil
}

// powerOn starts the VM ref (failback: the original, switched back).
func powerOn(ctx context.Context, c *vim25.Client, ref types.ManagedObjectReference) error {
	task, err := object.NewVirtualMachine(c, ref).PowerOn(ctx)
	if err == nil {
		err = task.Wait(ctx)
	}
	return err
}

// powerOff stops the VM ref at once when it runs (failback: the DR VM,
// whose disks are read next; as libvirt's and QEMU's failbacks do).
func powerOff(ctx context.Context, c *vim25.Client, ref types.ManagedObjectReference, state types.VirtualMachinePowerState) error {
	if state == types.VirtualMachinePowerStatePoweredOff {
		return nil
	}
	task, err := object.NewVirtualMachine(c, ref).PowerOff(ctx)
	if err == nil {
		err = task.Wait(ctx)
	}
	return err
}
