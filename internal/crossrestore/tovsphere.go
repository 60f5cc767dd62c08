package crossrestore

import (
	"encoding/json"
	"fmt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/vmconfig"
)

// vsphereControllers are neutral buses as vSphere's controllers, where
// vSphere has the same device.
var vsphereControllers = map[string]string{busPVSCSI: vmconfig.PVSCSI, busLSISAS: vmconfig.LSILogicSAS, busSATA: vmconfig.SATA,
	busIDE: vmconfig.IDE, busNVMe: vmconfig.NVMe, busLSIParal: vmconfig.LSILogic, busBusLogic: vmconfig.BusLogic}

// unitsPerBus is how many disks one controller of a kind takes (a SCSI
// controller's unit 7 is its own).
var unitsPerBus = map[string]int32{vmconfig.PVSCSI: 16, vmconfig.LSILogicSAS: 16, vmconfig.LSILogic: 16, vmconfig.BusLogic: 16,
	vmconfig.SATA: 30, vmconfig.IDE: 2, vmconfig.NVMe: 15}

// vsphereModels are neutral adapter models as vSphere's device types.
var vsphereModels = map[string]string{nicVmxnet3: "VirtualVmxnet3", nicE1000: "VirtualE1000", nicE1000e: "VirtualE1000e",
	nicPCNet: "VirtualPCNet32"}

// vsphereGuests are the guest IDs a mapped VM gets, by family.
var vsphereGuests = map[string]string{windowsGuest: "windows9Server64Guest", linuxGuest: "otherLinux64Guest", otherGuest: "otherGuest64"}

// toVSphere writes m as a new vSphere VM's recorded configuration.
func toVSphere(m *machine, o Options, r *Report) (*Plan, error) {
	n := vmconfig.Native{GuestID: vsphereGuests[m.guest.family]}
	cfg := hypervisor.VMConfig{Kind: "vsphere", Name: m.name, CPUs: max(m.cpus, 1), MemoryMiB: max(m.memoryMiB, 4), Firmware: m.firmware}
	r.Mapped = append(r.Mapped, Item{Kind: "cpus", Name: "cpus", From: fmt.Sprint(m.cpus), To: fmt.Sprint(cfg.CPUs)},
		Item{Kind: "memory", Name: "memory", From: fmt.Sprintf("%d MiB", m.memoryMiB), To: fmt.Sprintf("%d MiB", cfg.MemoryMiB)},
		Item{Kind: "guest", Name: "guest OS", From: cmpOr(m.guest.id, "not recorded"), To: n.GuestID})
	fw := Item{Kind: "firmware", Name: "firmware", From: "BIOS", To: "BIOS"}
	if m.firmware == "efi" {
		fw = Item{Kind: "firmware", Name: "firmware", From: "EFI", To: "EFI",
			Note: "the source's boot entries are not in the backup: the firmware boots the removable-media path \\EFI\\BOOT\\BOOTX64.EFI"}
	}
	r.Mapped = append(r.Mapped, fw)
	paravirtual := vsphereDisks(m, &n, &cfg, r)
	if vsphereNICsOf(m, o, &cfg, r) {
		paravirtual = true
	}
	vsphereNeeds(m, paravirtual, r)
	var err error
	if cfg.Native, err = json.Marshal(n); err != nil {
		return nil, err
	}
	keys := map[string]string{}
	for _, d := range m.disks {
		keys[d.key] = d.key
	}
	return &Plan{Config: cfg, DiskKeys: keys}, nil
}

// vsphereDisks places m's disks on vSphere controllers: the same device
// where vSphere has it, else VMware Paravirtual SCSI (LSI Logic SAS for
// a Windows guest, which drives it without VMware Tools). It says
// whether a disk went onto VMware's paravirtual controller from another.
func vsphereDisks(m *machine, n *vmconfig.Native, cfg *hypervisor.VMConfig, r *Report) bool {
	substitute := vmconfig.PVSCSI
	if m.guest.family == windowsGuest {
		substitute = vmconfig.LSILogicSAS
	}
	type place struct{ bus, unit int32 }
	next := map[string]place{}
	paravirtual := false
	for _, d := range m.disks {
		ctrl, same := vsphereControllers[d.bus]
		if !same {
			ctrl = substitute
			paravirtual = paravirtual || ctrl == vmconfig.PVSCSI
		}
		p := next[ctrl]
		if (ctrl == vmconfig.PVSCSI || ctrl == vmconfig.LSILogicSAS || ctrl == vmconfig.LSILogic || ctrl == vmconfig.BusLogic) && p.unit == 7 {
			p.unit++
		}
		if p.unit >= unitsPerBus[ctrl] {
			p = place{bus: p.bus + 1}
		}
		n.Disks = append(n.Disks, vmconfig.Disk{Key: d.key, Controller: ctrl, Bus: p.bus, Unit: p.unit})
		cfg.Disks = append(cfg.Disks, hypervisor.DiskInfo{Key: d.key, Name: d.name, Size: d.size, Datastore: d.datastore})
		if d.boot {
			n.BootDisk = d.key
		}
		to := fmt.Sprintf("%s %d:%d", ctrl, p.bus, p.unit)
		item := Item{Kind: "disk", Name: d.name, From: busName(d.bus), To: to, Note: sizeNote(d)}
		if !same {
			item.Note += "; vSphere has no " + busName(d.bus) + " controller"
		}
		r.Mapped = append(r.Mapped, item)
		p.unit++
		next[ctrl] = p
	}
	return paravirtual
}

// vsphereNICsOf gives m's adapters vSphere's models on their networks.
// It says whether one became VMXNET3 from another model.
func vsphereNICsOf(m *machine, o Options, cfg *hypervisor.VMConfig, r *Report) bool {
	paravirtual := false
	for _, x := range m.nics {
		model, same := vsphereModels[x.model]
		if !same {
			model = "VirtualVmxnet3"
			if m.guest.family == windowsGuest {
				model = "VirtualE1000e" // Windows drives it with its own driver
			}
			paravirtual = paravirtual || model == "VirtualVmxnet3"
		}
		network := cmpOr(o.Network, x.network)
		if network == "" {
			r.Unmapped = append(r.Unmapped, Item{Kind: "nic", Name: x.key, From: cmpOr(x.model, "unknown model"),
				Note: "the adapter records no network vSphere knows: it is left out; name a vSphere network with --network"})
			continue
		}
		cfg.NICs = append(cfg.NICs, hypervisor.NICConfig{Key: x.key, Network: network, Model: model})
		r.Mapped = append(r.Mapped, Item{Kind: "nic", Name: x.key, From: cmpOr(x.model, "unknown model"), To: model + " on " + network,
			Note: "vSphere network " + network + " must exist, or the adapter is left out; the adapter gets a new MAC address"})
	}
	return paravirtual
}

// vsphereNeeds says what the guest needs under vSphere.
func vsphereNeeds(m *machine, paravirtual bool, r *Report) {
	switch m.guest.family {
	case windowsGuest:
		r.Needs = append(r.Needs, "Windows guest: its disks go on LSI Logic SAS and its adapters on E1000E, which Windows drives with its own drivers; "+
			"install VMware Tools in it for VMware Paravirtual SCSI and VMXNET3")
	default:
		if paravirtual {
			r.Needs = append(r.Needs, "the guest's disks go on VMware Paravirtual SCSI and its adapters on VMXNET3: "+
				"its initramfs must hold the vmw_pvscsi driver to find its boot disk, and it needs the vmxnet3 driver for its network")
		}
		if m.guest.family == otherGuest {
			r.Needs = append(r.Needs, "the point does not record the guest's operating system: the VM's guest type is "+
				vsphereGuests[otherGuest]+"; set the right one in vSphere")
		}
	}
	r.Needs = append(r.Needs, "VMware Tools (open-vm-tools on Linux) for quiesced backups and guest operations under vSphere")
}
