package crossrestore

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// qemuControllers are QEMU's SCSI and SATA controller devices as the
// neutral buses of the disks on them.
var qemuControllers = map[string]string{"virtio-scsi-pci": busVirtioSCSI, "pvscsi": busPVSCSI, "mptsas1068": busLSISAS,
	"lsi53c895a": busLSI895, "ich9-ahci": busSATA, "ahci": busSATA}

// qemuNICs are QEMU's network devices as neutral models.
var qemuNICs = map[string]string{"virtio-net-pci": nicVirtio, "virtio-net": nicVirtio, "e1000": nicE1000, "e1000e": nicE1000e,
	"vmxnet3": nicVmxnet3, "rtl8139": nicRTL8139, "pcnet": nicPCNet}

// qemuDevice is one -device option: its driver and properties.
type qemuDevice struct {
	driver string
	props  map[string]string
}

// fromQEMU reads a QEMU point's VM from its recorded command line.
func fromQEMU(cfg hypervisor.VMConfig) (*machine, error) {
	var native struct {
		CmdLine []string `json:"cmdline"`
	}
	if err := json.Unmarshal(cfg.Native, &native); err != nil || len(native.CmdLine) == 0 {
		return nil, fmt.Errorf("the backup point records no QEMU command line")
	}
	m := &machine{name: cfg.Name, cpus: cfg.CPUs, memoryMiB: cfg.MemoryMiB, firmware: "bios"}
	var devs []qemuDevice
	byID := map[string]qemuDevice{}
	args := native.CmdLine[1:]
	for i := 0; i+1 < len(args); i++ {
		opt, val := args[i], args[i+1]
		switch opt {
		case "-device":
			d := parseDevice(val)
			devs = append(devs, d)
			if id := d.props["id"]; id != "" {
				byID[id] = d
			}
		case "-bios":
			m.firmware = firmwareOf(val)
		case "-drive":
			if strings.Contains(val, "if=pflash") {
				m.firmware = "efi"
			}
		case "-kernel":
			m.unread = append(m.unread, directKernel(val))
		default:
			continue
		}
		i++
	}
	bus := map[string]string{}
	disks := cfg
	disks.Disks = nil
	for _, d := range cfg.Disks {
		if strings.HasPrefix(d.Key, "pflash") {
			// The firmware's variable store, which QEMU backs up as a
			// drive: the target keeps its own.
			m.unread = append(m.unread, Item{Kind: "firmware", Name: d.Key, From: "the EFI variable store (pflash drive)",
				Note: "the target keeps its own firmware variables: the VM's boot entries are not restored, and the firmware " +
					"boots the removable-media path \\EFI\\BOOT\\BOOTX64.EFI"})
			continue
		}
		disks.Disks = append(disks.Disks, d)
		if dev, ok := byID[d.Key]; ok {
			bus[d.Key] = qemuDiskBus(dev, byID)
		}
	}
	m.disks = disksOf(disks, bus, "", &m.unread)
	for _, d := range devs {
		model, ok := qemuNICs[d.driver]
		if !ok {
			continue
		}
		m.nics = append(m.nics, nic{key: cmpOr(d.props["id"], d.props["netdev"]), model: model})
	}
	return m, nil
}

// qemuDiskBus is the bus of a disk device: its own driver's, or for a
// SCSI or IDE disk that of the controller its bus property names.
func qemuDiskBus(dev qemuDevice, byID map[string]qemuDevice) string {
	switch dev.driver {
	case "virtio-blk-pci", "virtio-blk":
		return busVirtioBlk
	case "nvme":
		return busNVMe
	case "scsi-hd", "scsi-disk", "ide-hd", "ide-drive":
		ctrl, _, _ := strings.Cut(dev.props["bus"], ".")
		if b, ok := qemuControllers[byID[ctrl].driver]; ok {
			return b
		}
		if strings.HasPrefix(dev.driver, "ide") {
			return busIDE // the machine's own IDE controller
		}
		return busLSI895 // QEMU's default SCSI controller
	}
	return ""
}

// parseDevice reads a -device value in its QemuOpts form (driver first,
// then key=value) or its JSON form.
func parseDevice(val string) qemuDevice {
	d := qemuDevice{props: map[string]string{}}
	if strings.HasPrefix(val, "{") {
		var m map[string]any
		if json.Unmarshal([]byte(val), &m) == nil {
			for k, v := range m {
				d.props[k] = fmt.Sprint(v)
			}
			d.driver = d.props["driver"]
		}
		return d
	}
	for i, kv := range strings.Split(val, ",") {
		k, v, ok := strings.Cut(kv, "=")
		switch {
		case i == 0 && !ok:
			d.driver = k
		case k == "driver":
			d.driver = v
		default:
			d.props[k] = v
		}
	}
	return d
}
