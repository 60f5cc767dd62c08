package crossrestore

import (
	"fmt"
	"strconv"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/libvirt/domconfig"
)

// libvirtSCSI are libvirt's SCSI controller models as neutral buses
// (libvirt's default on x86 is QEMU's lsi53c895a).
var libvirtSCSI = map[string]string{"": busLSI895, "lsilogic": busLSI895, "virtio-scsi": busVirtioSCSI,
	"vmpvscsi": busPVSCSI, "lsisas1068": busLSISAS, "buslogic": busBusLogic}

// libvirtNICs are libvirt's interface models as neutral ones.
var libvirtNICs = map[string]string{"virtio": nicVirtio, "e1000": nicE1000, "e1000e": nicE1000e, "vmxnet3": nicVmxnet3,
	"rtl8139": nicRTL8139, "pcnet": nicPCNet, "": nicRTL8139}

// fromLibvirt reads a libvirt point's VM from its recorded definition.
func fromLibvirt(cfg hypervisor.VMConfig) (*machine, error) {
	d, err := domconfig.Read(cfg.Native)
	if err != nil {
		return nil, err
	}
	fw := firmwareOf(d.OS.Firmware)
	if d.OS.Loader.Type == "pflash" || firmwareOf(d.OS.Loader.Path) == "efi" {
		fw = "efi"
	}
	osID := d.Metadata.Libosinfo.OS.ID
	m := &machine{name: cfg.Name, cpus: cfg.CPUs, memoryMiB: cfg.MemoryMiB, firmware: fw, guest: guest{family: guestFamily(osID), id: osID}}
	if d.OS.Kernel != "" {
		m.unread = append(m.unread, directKernel(d.OS.Kernel))
	}
	scsi := map[int]string{}
	for _, c := range d.Devices.Controllers {
		if c.Type == "scsi" {
			scsi[c.Index] = c.Model
		}
	}
	bus := map[string]string{}
	boot, bootOrder := "", 0
	for _, x := range d.Devices.Disks {
		dev := x.Target.Dev
		switch x.Target.Bus {
		case "virtio":
			bus[dev] = busVirtioBlk
		case "sata", "ide":
			bus[dev] = x.Target.Bus
		case "scsi":
			idx, _ := strconv.Atoi(x.Address.Controller)
			bus[dev] = libvirtSCSI[scsi[idx]]
		}
		if x.Boot != nil && (boot == "" || x.Boot.Order < bootOrder) {
			boot, bootOrder = dev, x.Boot.Order
		}
	}
	m.disks = disksOf(cfg, bus, boot, &m.unread)
	for i, n := range d.Devices.Interfaces {
		model, ok := libvirtNICs[n.Model.Type]
		if !ok {
			m.unread = append(m.unread, Item{Kind: "nic", Name: fmt.Sprint("net", i), From: n.Model.Type,
				Note: "an adapter model coffer does not know; it gets the target's default model"})
		}
		key, network := fmt.Sprint("net", i), ""
		if i < len(cfg.NICs) {
			key, network = cmpOr(cfg.NICs[i].Key, key), cfg.NICs[i].Network
		}
		m.nics = append(m.nics, nic{key: key, network: network, model: model})
	}
	return m, nil
}

// disksOf are cfg's disks on the buses a definition put them on; the
// boot disk is boot, or the first.
func disksOf(cfg hypervisor.VMConfig, bus map[string]string, boot string, unread *[]Item) []disk {
	if _, ok := bus[boot]; !ok && len(cfg.Disks) > 0 {
		boot = cfg.Disks[0].Key
	}
	var out []disk
	for _, d := range cfg.Disks {
		nd := disk{key: d.Key, name: d.Name, size: d.Size, datastore: d.Datastore, bus: bus[d.Key], boot: d.Key == boot}
		if nd.bus == "" {
			*unread = append(*unread, Item{Kind: "disk", Name: d.Name, From: "an unknown bus",
				Note: "the disk goes on the target's default controller"})
		}
		out = append(out, nd)
	}
	return out
}

// directKernel is the item a VM booted by a kernel outside its disks
// leaves unmapped.
func directKernel(kernel string) Item {
	return Item{Kind: "boot", Name: "kernel", From: "a kernel booted directly (" + kernel + ")",
		Note: "the target boots from the disks' own boot loader; the kernel and initrd outside the disks are not in the backup"}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
