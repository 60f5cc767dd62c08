package crossrestore

import (
	"strings"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/vmconfig"
)

// vsphereBuses are vSphere's disk controllers as neutral buses.
var vsphereBuses = map[string]string{vmconfig.PVSCSI: busPVSCSI, vmconfig.LSILogic: busLSIParal, vmconfig.LSILogicSAS: busLSISAS,
	vmconfig.BusLogic: busBusLogic, vmconfig.SATA: busSATA, vmconfig.IDE: busIDE, vmconfig.NVMe: busNVMe}

// vsphereNICs are vSphere's adapter device types as neutral models.
var vsphereNICs = map[string]string{"VirtualVmxnet3": nicVmxnet3, "VirtualE1000": nicE1000, "VirtualE1000e": nicE1000e,
	"VirtualPCNet32": nicPCNet}

// fromVSphere reads a vSphere point's VM: its disks' controllers from
// the placement the point recorded (vmconfig).
func fromVSphere(cfg hypervisor.VMConfig) (*machine, error) {
	native, err := vmconfig.Parse(cfg)
	if err != nil {
		return nil, err
	}
	m := &machine{name: cfg.Name, cpus: cfg.CPUs, memoryMiB: cfg.MemoryMiB, firmware: firmwareOf(cfg.Firmware),
		guest: guest{family: guestFamily(native.GuestID), id: native.GuestID}}
	placed := map[string]vmconfig.Disk{}
	for _, d := range native.Disks {
		placed[d.Key] = d
	}
	boot := native.BootDisk
	if _, ok := placed[boot]; !ok && len(cfg.Disks) > 0 {
		boot = cfg.Disks[0].Key
	}
	for _, d := range cfg.Disks {
		nd := disk{key: d.Key, name: d.Name, size: d.Size, datastore: d.Datastore, boot: d.Key == boot}
		p, ok := placed[d.Key]
		switch {
		case !ok:
			m.unread = append(m.unread, Item{Kind: "disk", Name: d.Name, From: "no recorded controller",
				Note: "the point predates coffer's record of disk placement; the disk goes on the target's default controller"})
		case vsphereBuses[p.Controller] == "":
			m.unread = append(m.unread, Item{Kind: "disk", Name: d.Name, From: p.Controller,
				Note: "a controller coffer does not know; the disk goes on the target's default controller"})
		default:
			nd.bus = vsphereBuses[p.Controller]
		}
		m.disks = append(m.disks, nd)
	}
	for _, n := range cfg.NICs {
		model := vsphereNICs[n.Model]
		if model == "" {
			m.unread = append(m.unread, Item{Kind: "nic", Name: n.Key, From: n.Model,
				Note: "an adapter coffer does not know; it gets the target's default model"})
		}
		m.nics = append(m.nics, nic{key: n.Key, network: n.Network, model: model})
	}
	return m, nil
}

// firmwareOf is a recorded firmware as "bios" or "efi".
func firmwareOf(s string) string {
	s = strings.ToLower(s)
	if s == "efi" || strings.Contains(s, "ovmf") || strings.Contains(s, "edk2") || strings.Contains(s, "uefi") {
		return "efi"
	}
	return "bios"
}
