package crossrestore

import (
	"encoding/json"
	"fmt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/ovmf"
)

// qemuBus is how a neutral bus is attached on a QEMU command line: the
// controller device (none for virtio-blk and the machine's IDE) and the
// disk device.
var qemuBus = map[string]struct{ ctrl, disk string }{
	busVirtioBlk: {"", "virtio-blk-pci"}, busVirtioSCSI: {"virtio-scsi-pci", "scsi-hd"}, busPVSCSI: {"pvscsi", "scsi-hd"},
	busLSISAS: {"mptsas1068", "scsi-hd"}, busLSI895: {"lsi53c895a", "scsi-hd"}, busSATA: {"ahci", "ide-hd"},
	busIDE: {"", "ide-hd"}, busNVMe: {"", "nvme"},
}

// qemuModels are neutral adapter models as QEMU's devices.
var qemuModels = map[string]string{nicVirtio: "virtio-net-pci", nicVmxnet3: "vmxnet3", nicE1000: "e1000", nicE1000e: "e1000e",
	nicPCNet: "pcnet", nicRTL8139: "rtl8139"}

// qemuNativeDisk is a disk as the QEMU connector records it for
// RelaunchArgs: the -drive's file, which the restore points at the new
// file.
type qemuNativeDisk struct {
	ID, File, Format string
}

// toQEMU writes m as a QEMU command line a restore into a directory
// relaunches (qemu.RelaunchArgs), its disks on -drive options.
func toQEMU(m *machine, o Options, r *Report) (*Plan, error) {
	cpus, mem := max(m.cpus, 1), max(m.memoryMiB, 16)
	machine := "pc"
	if m.firmware == "efi" {
		machine = "q35"
	}
	args := []string{"qemu-system-x86_64", "-machine", machine, "-accel", "kvm", "-accel", "tcg", "-smp", fmt.Sprint(cpus),
		"-m", fmt.Sprint(mem), "-nodefaults", "-vga", "std", "-display", "none", "-name", m.name}
	r.Mapped = append(r.Mapped, Item{Kind: "cpus", Name: "cpus", From: fmt.Sprint(m.cpus), To: fmt.Sprint(cpus)},
		Item{Kind: "memory", Name: "memory", From: fmt.Sprintf("%d MiB", m.memoryMiB), To: fmt.Sprintf("%d MiB", mem)})
	if m.firmware == "efi" {
		fw, ok := ovmf.Find()
		if !ok {
			return nil, fmt.Errorf("the VM boots with EFI firmware and this host has no OVMF (install the ovmf package): %w", hypervisor.ErrUnsupported)
		}
		args = append(args, "-drive", "if=pflash,format=raw,readonly=on,file="+fw.Code)
		if fw.Vars != "" {
			// The variables start from the template at each boot: the
			// source's boot entries are not in the backup anyway.
			args = append(args, "-drive", "if=pflash,format=raw,snapshot=on,file="+fw.Vars)
		}
		r.Mapped = append(r.Mapped, Item{Kind: "firmware", Name: "firmware", From: "EFI", To: "EFI (" + fw.Code + "), machine q35",
			Note: "the source's boot entries are not in the backup: the firmware boots the removable-media path \\EFI\\BOOT\\BOOTX64.EFI"})
	} else {
		r.Mapped = append(r.Mapped, Item{Kind: "firmware", Name: "firmware", From: "BIOS", To: "BIOS (SeaBIOS), machine pc"})
	}
	cfg := hypervisor.VMConfig{Kind: "qemu", Name: m.name, CPUs: cpus, MemoryMiB: mem, Firmware: m.firmware}
	disks, devs := qemuDisks(m, &cfg, r)
	args = append(args, devs...)
	for i, n := range m.nics {
		model := qemuModels[n.model]
		if model == "" {
			model = "virtio-net-pci"
		}
		id := fmt.Sprint("net", i)
		args = append(args, "-netdev", "user,restrict=on,id="+id, "-device", fmt.Sprintf("%s,netdev=%s,id=%s-dev", model, id, id))
		r.Mapped = append(r.Mapped, Item{Kind: "nic", Name: n.key, From: cmpOr(n.model, "unknown model"), To: model + " on an isolated user-mode network",
			Note: "attach it to a network of this host by editing the launch script"})
	}
	qemuNeeds(m, r)
	var err error
	if cfg.Native, err = json.Marshal(map[string]any{"cmdline": args, "disks": disks}); err != nil {
		return nil, err
	}
	keys := map[string]string{}
	for _, d := range m.disks {
		keys[d.key] = d.key
	}
	return &Plan{Config: cfg, DiskKeys: keys}, nil
}

// qemuDisks puts m's disks on -drive and -device options, the boot disk
// first in the boot order.
func qemuDisks(m *machine, cfg *hypervisor.VMConfig, r *Report) ([]qemuNativeDisk, []string) {
	var disks []qemuNativeDisk
	var args []string
	ctrls := map[string]string{} // controller device -> id
	units := map[string]int{}
	for _, d := range m.disks {
		b, ok := qemuBus[d.bus]
		if !ok {
			b = qemuBus[busSATA]
			r.Unmapped = append(r.Unmapped, Item{Kind: "disk", Name: d.name, From: busName(d.bus), To: busName(busSATA),
				Note: "QEMU does not emulate " + busName(d.bus) + ": the disk goes on " + busName(busSATA) +
					", and the guest needs its AHCI driver to find it"})
		}
		// A placeholder file: the restore points the drive at the new one.
		file := "/coffer-mapped/" + d.key
		drive := "drive-" + d.key
		args = append(args, "-drive", fmt.Sprintf("if=none,id=%s,format=raw,file=%s", drive, file))
		// QEMU's identifiers start with a letter; vSphere's keys are numbers.
		dev := b.disk + ",drive=" + drive + ",id=disk-" + d.key
		switch {
		case b.ctrl != "":
			id, ok := ctrls[b.ctrl]
			if !ok {
				id = fmt.Sprint("ctrl", len(ctrls))
				ctrls[b.ctrl] = id
				args = append(args, "-device", b.ctrl+",id="+id)
			}
			if b.disk == "scsi-hd" {
				dev += fmt.Sprintf(",bus=%s.0,scsi-id=%d", id, units[id])
			} else {
				dev += fmt.Sprintf(",bus=%s.%d", id, units[id])
			}
			units[id]++
		case b.disk == "ide-hd":
			dev += fmt.Sprintf(",bus=ide.%d,unit=%d", units["ide"]/2, units["ide"]%2)
			units["ide"]++
		case b.disk == "nvme":
			dev += ",serial=" + d.key
		}
		if d.boot {
			dev += ",bootindex=0"
		}
		args = append(args, "-device", dev)
		disks = append(disks, qemuNativeDisk{ID: d.key, File: file, Format: "raw"})
		cfg.Disks = append(cfg.Disks, hypervisor.DiskInfo{Key: d.key, Name: d.name, Size: d.size})
		if ok {
			r.Mapped = append(r.Mapped, Item{Kind: "disk", Name: d.name, From: busName(d.bus), To: b.disk + " on " + busName(d.bus), Note: sizeNote(d)})
		}
	}
	return disks, args
}

// qemuNeeds says what the guest needs under QEMU.
func qemuNeeds(m *machine, r *Report) {
	switch m.guest.family {
	case windowsGuest:
		r.Needs = append(r.Needs, "Windows guest: it keeps the devices it has drivers for; to move it to KVM's paravirtual devices, "+
			"install the virtio drivers (virtio-win: viostor, vioscsi, NetKVM) in it first, then change its disks and adapters to virtio")
	case otherGuest:
		r.Needs = append(r.Needs, "the point does not record the guest's operating system: check that it drives the devices above")
	}
}
