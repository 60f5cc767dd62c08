// Package restoredevs builds the virtual hardware a vSphere restore gives
// a new VM's disks from the configuration its point recorded: the
// controllers of the recorded kinds at their bus numbers, each disk at
// its unit, and the file names the connector finds the disks by again.
package restoredevs

import (
	"fmt"
	"log/slog"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/vmconfig"
)

// Disks adds a restored VM's disks to devs on the controllers the
// point recorded: the same kind, bus and unit. A guest finds its disks
// through the driver of its controller (Windows stops at boot without
// it, a Linux initramfs may lack pvscsi), and names them by where they
// sit. Disks a point did not place (points from before coffer recorded
// placement, or a controller kind it does not know) go on pvscsi
// controllers, 15 to each, as before.
func Disks(devs object.VirtualDeviceList, cfg hypervisor.VMConfig, native vmconfig.Native, ds, name string, log *slog.Logger) (object.VirtualDeviceList, error) {
	placed := map[string]vmconfig.Disk{}
	for _, d := range native.Disks {
		placed[d.Key] = d
	}
	type bus struct {
		kind string
		n    int32
	}
	// Recorded controllers first, at their bus numbers; the fallback's
	// then take bus numbers left free.
	ctrls := map[bus]types.BaseVirtualController{}
	for _, d := range cfg.Disks {
		p, ok := placed[d.Key]
		if !ok || !restorable(p.Controller) {
			continue
		}
		b := bus{p.Controller, p.Bus}
		if ctrls[b] != nil {
			continue
		}
		dev, err := newController(devs, p.Controller, p.Bus)
		if err != nil {
			return nil, fmt.Errorf("restore: disk %s's %s controller %d: %w", d.Name, p.Controller, p.Bus, err)
		}
		if dev != nil { // nil: a controller every new VM has (IDE)
			devs = append(devs, dev)
			ctrls[b] = dev.(types.BaseVirtualController)
		} else {
			ctrls[b] = &types.VirtualIDEController{VirtualController: types.VirtualController{
				VirtualDevice: types.VirtualDevice{Key: ideKey + p.Bus}, BusNumber: p.Bus}}
		}
	}
	var fallback types.BaseVirtualController
	onFallback := 0
	for i, d := range cfg.Disks {
		p, ok := placed[d.Key]
		var ctrl types.BaseVirtualController
		switch {
		case ok && restorable(p.Controller):
			ctrl = ctrls[bus{p.Controller, p.Bus}]
		default:
			if ok {
				log.Warn("vsphere: restore: the recorded controller is not one coffer recreates; the disk goes on a pvscsi controller",
					"disk", d.Name, "controller", p.Controller)
			}
			if fallback == nil || onFallback == 15 { // unit 7 is the controller's
				scsi, err := devs.CreateSCSIController(vmconfig.PVSCSI)
				if err != nil {
					return nil, err
				}
				devs = append(devs, scsi)
				fallback, onFallback = scsi.(types.BaseVirtualController), 0
			}
			ctrl = fallback
			onFallback++
		}
		disk := devs.CreateDisk(ctrl, types.ManagedObjectReference{}, DiskFile(ds, name, i))
		if ok && restorable(p.Controller) {
			unit := p.Unit
			disk.UnitNumber = &unit
		}
		disk.CapacityInKB = (d.Size + 1023) / 1024
		disk.CapacityInBytes = d.Size
		devs = append(devs, disk)
	}
	return devs, nil
}

// ideKey is the device key of the first of the two IDE controllers
// vSphere gives every VM it creates (the second is ideKey+1).
const ideKey = 200

// restorable reports whether restoreDisks recreates a controller kind.
func restorable(kind string) bool {
	switch kind {
	case vmconfig.PVSCSI, vmconfig.LSILogic, vmconfig.LSILogicSAS, vmconfig.BusLogic, vmconfig.SATA, vmconfig.NVMe, vmconfig.IDE:
		return true
	}
	return false
}

// newController makes a controller of a recorded kind at its bus number;
// nil for IDE, whose two controllers every new VM has.
func newController(devs object.VirtualDeviceList, kind string, bus int32) (types.BaseVirtualDevice, error) {
	switch kind {
	case vmconfig.SATA:
		dev, err := devs.CreateSATAController()
		if err == nil {
			dev.(types.BaseVirtualController).GetVirtualController().BusNumber = bus
		}
		return dev, err
	case vmconfig.NVMe:
		dev, err := devs.CreateNVMEController()
		if err == nil {
			dev.(types.BaseVirtualController).GetVirtualController().BusNumber = bus
		}
		return dev, err
	case vmconfig.IDE:
		if bus > 1 {
			return nil, fmt.Errorf("a VM has IDE controllers 0 and 1, not %d", bus)
		}
		return nil, nil
	}
	dev, err := devs.CreateSCSIController(kind)
	if err == nil {
		dev.(types.BaseVirtualSCSIController).GetVirtualSCSIController().BusNumber = bus
	}
	return dev, err
}

// DiskFile is the i-th disk's file of a restored VM; CreateVM
// finds each created disk by it.
func DiskFile(ds, name string, i int) string {
	return fmt.Sprintf("[%s] %s/%s_%d.vmdk", ds, name, name, i)
}
