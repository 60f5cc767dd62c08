package vsphere

import (
	"fmt"
	"strings"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/vmconfig"
)

// nativeOf records what describe learns of a VM's configuration and its
// devices at the snapshot.
func nativeOf(cfg *types.VirtualMachineConfigInfo, devs []types.BaseVirtualDevice) vmconfig.Native {
	n := vmconfig.Native{GuestID: cfg.GuestId, Version: cfg.Version, BIOSUUID: cfg.Uuid}
	controllers := map[int32]types.BaseVirtualDevice{}
	for _, d := range devs {
		if _, ok := d.(types.BaseVirtualController); ok {
			controllers[d.GetVirtualDevice().Key] = d
		}
	}
	for _, d := range devs {
		vd, ok := d.(*types.VirtualDisk)
		if !ok {
			continue
		}
		nd := vmconfig.Disk{Key: fmt.Sprint(vd.Key), Controller: "none"}
		if vd.UnitNumber != nil {
			nd.Unit = *vd.UnitNumber
		}
		if c, ok := controllers[vd.ControllerKey]; ok {
			nd.Controller = controllerKind(c)
			nd.Bus = c.(types.BaseVirtualController).GetVirtualController().BusNumber
		}
		n.Disks = append(n.Disks, nd)
	}
	if bo := cfg.BootOptions; bo != nil {
		for _, b := range bo.BootOrder {
			if disk, ok := b.(*types.VirtualMachineBootOptionsBootableDiskDevice); ok {
				n.BootDisk = fmt.Sprint(disk.DeviceKey)
				break
			}
		}
	}
	return n
}

// controllerKind names a disk controller device.
func controllerKind(d types.BaseVirtualDevice) string {
	switch d.(type) {
	case *types.ParaVirtualSCSIController:
		return vmconfig.PVSCSI
	case *types.VirtualLsiLogicController:
		return vmconfig.LSILogic
	case *types.VirtualLsiLogicSASController:
		return vmconfig.LSILogicSAS
	case *types.VirtualBusLogicController:
		return vmconfig.BusLogic
	case *types.VirtualAHCIController:
		return vmconfig.SATA
	case *types.VirtualIDEController:
		return vmconfig.IDE
	case *types.VirtualNVMEController:
		return vmconfig.NVMe
	}
	return strings.TrimPrefix(fmt.Sprintf("%T", d), "*types.")
}
