package bootverify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/libvirt/domconfig"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/repo"
)

// libvirtNICs are the interface models QEMU emulates under libvirt's
// names; the probes reach the guest through the first of them. VMXNET3
// is a domain's that was restored from a vSphere point.
var libvirtNICs = map[string]string{"virtio": "virtio-net-pci", "e1000": "e1000", "e1000e": "e1000e", "rtl8139": "rtl8139",
	"vmxnet3": "vmxnet3"}

// libvirtSCSI are the SCSI controller models QEMU emulates, as libvirt
// starts them (libvirt's default model on x86 is lsilogic); vmpvscsi and
// lsisas1068 are VMware's, which a domain restored from a vSphere point
// keeps.
var libvirtSCSI = map[string]string{"": "lsi53c895a", "lsilogic": "lsi53c895a", "virtio-scsi": "virtio-scsi-pci",
	"vmpvscsi": "pvscsi", "lsisas1068": "mptsas1068"}

// libvirtDisk is one disk of the machine: where libvirt attached it.
type libvirtDisk struct {
	key, bus, ctrlModel string
	ctrl, unit, order   int
}

// libvirtMachine is a libvirt point's VM as QEMU starts it without
// libvirt: the recorded domain's machine type, firmware, direct kernel
// boot, disks on the buses libvirt put them on and guest agent channel.
type libvirtMachine struct {
	machineType, uuid       string
	cpus                    int
	memoryMB                int64
	efi                     *efiFirmware
	kernel, initrd, cmdline string
	disks                   []libvirtDisk
	agent                   bool
	nic                     string
	evidence                map[string]string
}

// planLibvirt maps a libvirt point's recorded domain to a QEMU machine on
// host h for probes. A *CannotVerifyError says why the VM cannot run as
// its guest expects here.
func planLibvirt(cfg hypervisor.VMConfig, keys []string, h hostQEMU, probes []Probe) (*libvirtMachine, error) {
	d, err := domconfig.Read(cfg.Native)
	if errors.Is(err, domconfig.ErrNoDefinition) {
		return nil, cannotVerify("the point records no domain XML")
	} else if err != nil {
		return nil, err
	}
	m := &libvirtMachine{uuid: cfg.UUID, cpus: max(cfg.CPUs, 1), memoryMB: cfg.MemoryMiB, evidence: map[string]string{}}
	if arch := d.OS.Type.Arch; arch != "" && arch != "x86_64" && arch != "i686" {
		return nil, cannotVerify("the domain's architecture is %s; boot verification runs x86 guests", arch)
	}
	m.machineType = "pc"
	if strings.Contains(d.OS.Type.Machine, "q35") {
		m.machineType = "q35"
	}
	m.evidence["machine"] = fmt.Sprintf("%s (recorded %q, domain type %s; here under TCG)", m.machineType, d.OS.Type.Machine, d.Type)
	if err := m.firmware(d, h); err != nil {
		return nil, err
	}
	if err := m.planDisks(d, keys, h); err != nil {
		return nil, err
	}
	for _, ch := range d.Devices.Channels {
		m.agent = m.agent || ch.Target.Type == "virtio" && ch.Target.Name == "org.qemu.guest_agent.0"
	}
	for _, p := range probes {
		if p.Kind == ProbeExec && !m.agent {
			return nil, cannotVerify("probe %s runs through the guest agent, and the domain has no guest agent channel", p)
		}
		if p.Kind != ProbeExec && m.nic == "" {
			if err := m.network(cfg.NICs, h); err != nil {
				return nil, err
			}
		}
	}
	fitHost(&m.cpus, &m.memoryMB, h, m.evidence)
	return m, nil
}

// firmware maps the domain's firmware and direct kernel boot.
func (m *libvirtMachine) firmware(d *domconfig.Domain, h hostQEMU) error {
	if d.OS.Firmware == "efi" || d.OS.Loader.Type == "pflash" {
		if h.efi.code == "" {
			return cannotVerify("the domain boots with EFI firmware and this host has no OVMF (install the ovmf package)")
		}
		m.efi = &h.efi
		m.evidence["firmware"] = "EFI (" + h.efi.code + "); the domain's NVRAM is not in the backup, so the guest " +
			"boots through its removable-media path (\\EFI\\BOOT\\BOOTX64.EFI)"
	} else {
		m.evidence["firmware"] = "BIOS (SeaBIOS)"
	}
	if d.OS.Kernel == "" {
		return nil
	}
	// Direct kernel boot: the kernel is a file of the domain's host,
	// not in the backup, as a QEMU point's -kernel is.
	for _, f := range []string{d.OS.Kernel, d.OS.Initrd} {
		if f == "" {
			continue
		}
		if _, err := os.Stat(f); err != nil {
			return cannotVerify("the domain boots the host's kernel file %s, which is not in the backup and not on this host", f)
		}
	}
	m.kernel, m.initrd, m.cmdline = d.OS.Kernel, d.OS.Initrd, d.OS.Cmdline
	m.evidence["kernel"] = d.OS.Kernel + " (a file of this host, not in the backup)"
	return nil
}

// planDisks places each backed-up disk on the bus libvirt gave it. Disks
// the backup does not hold (CD-ROMs, read-only images) are left out.
func (m *libvirtMachine) planDisks(d *domconfig.Domain, keys []string, h hostQEMU) error {
	held := map[string]bool{}
	for _, k := range keys {
		held[k] = true
	}
	scsiModels := map[int]string{}
	for _, c := range d.Devices.Controllers {
		if c.Type == "scsi" {
			scsiModels[c.Index] = c.Model
		}
	}
	need := func(key string, devs ...string) error {
		for _, dev := range devs {
			if !h.devices[dev] {
				return cannotVerify("disk %s needs the %s device, which this host's QEMU lacks", key, dev)
			}
		}
		return nil
	}
	var mapped []string
	for i, x := range d.Devices.Disks {
		if !held[x.Target.Dev] {
			continue
		}
		ld := libvirtDisk{key: x.Target.Dev, bus: x.Target.Bus, order: 1000 + i}
		if x.Boot != nil {
			ld.order = x.Boot.Order
		}
		if a := x.Address; a.Type == "drive" {
			num := func(v string) int { n, _ := strconv.ParseInt(v, 0, 32); return int(n) }
			ld.ctrl, ld.unit = num(a.Controller), num(a.Unit)+2*num(a.Bus)
		} else if dev := x.Target.Dev; dev != "" {
			ld.unit = int(dev[len(dev)-1] - 'a') // sda, hdc: libvirt's own rule when it assigns the address
		}
		var dev string
		var err error
		switch ld.bus {
		case "virtio":
			dev, err = "virtio-blk-pci", need(ld.key, "virtio-blk-pci")
		case "sata":
			if ld.unit > 5 {
				return cannotVerify("disk %s is on SATA port %d; QEMU's AHCI controller has ports 0 to 5", ld.key, ld.unit)
			}
			dev, err = "ahci port "+fmt.Sprint(ld.unit), need(ld.key, "ahci", "ide-hd")
		case "ide":
			if m.machineType == "q35" || ld.unit > 3 {
				return cannotVerify("disk %s is on IDE unit %d of a %s machine, which QEMU has no such port for", ld.key, ld.unit, m.machineType)
			}
			dev, err = fmt.Sprintf("ide %d:%d (the chipset's)", ld.unit/2, ld.unit%2), need(ld.key, "ide-hd")
		case "scsi":
			model, ok := libvirtSCSI[scsiModels[ld.ctrl]]
			if !ok {
				return cannotVerify("disk %s is on a SCSI controller of model %q, which coffer does not map to QEMU", ld.key, scsiModels[ld.ctrl])
			}
			ld.ctrlModel = model
			dev, err = model+" unit "+fmt.Sprint(ld.unit), need(ld.key, model, "scsi-hd")
		default:
			return cannotVerify("disk %s is on a %q bus, which coffer does not map to QEMU", ld.key, ld.bus)
		}
		if err != nil {
			return err
		}
		m.disks = append(m.disks, ld)
		mapped = append(mapped, ld.key+": "+ld.bus+" -> "+dev)
	}
	if len(m.disks) == 0 {
		return cannotVerify("the point holds none of the domain's disks")
	}
	sort.SliceStable(m.disks, func(i, j int) bool { return m.disks[i].order < m.disks[j].order })
	m.evidence["disks"] = strings.Join(mapped, "; ")
	m.evidence["boot_disk"] = m.disks[0].key
	return nil
}

// network picks the probes' adapter: the domain's first one QEMU here
// emulates.
func (m *libvirtMachine) network(nics []hypervisor.NICConfig, h hostQEMU) error {
	if len(nics) == 0 {
		return cannotVerify("the probes reach the guest over its network, and the domain has no network interface: verify it without tcp and http probes")
	}
	var models []string
	for _, n := range nics {
		if dev := libvirtNICs[n.Model]; dev != "" && h.devices[dev] {
			m.nic = dev
			m.evidence["network_adapter"] = dev
			return nil
		}
		models = append(models, n.Model)
	}
	return cannotVerify("the probes reach the guest over its network, and QEMU here emulates none of its interface models (%s): "+
		"verify it without tcp and http probes", strings.Join(models, ", "))
}

// args is the machine's command line for spec, in RelaunchArgs' form
// (monitor, pid file, daemonized, console to a file), under TCG.
func (m *libvirtMachine) args(spec qemu.LaunchSpec) ([]string, error) {
	a, err := machineStart(m.machineType, spec, m.uuid, m.cpus, m.memoryMB, m.efi)
	if err != nil {
		return nil, err
	}
	if m.kernel != "" {
		a = append(a, "-kernel", m.kernel)
		if m.initrd != "" {
			a = append(a, "-initrd", m.initrd)
		}
		if m.cmdline != "" {
			a = append(a, "-append", m.cmdline)
		}
	}
	controllers := map[string]bool{}
	for i, d := range m.disks {
		ld, ok := spec.Disks[d.key]
		if !ok {
			return nil, fmt.Errorf("no overlay for disk %s", d.key)
		}
		drive := "coffer-disk-" + d.key
		a = append(a, "-drive", fmt.Sprintf("if=none,id=%s,format=%s,file=%s", drive, ld.Format, escape(ld.Path)))
		var dev string
		switch d.bus {
		case "virtio":
			dev = "virtio-blk-pci"
		case "sata":
			if !controllers["sata"] {
				a = append(a, "-device", "ahci,id=coffer-sata")
			}
			controllers["sata"] = true
			dev = fmt.Sprintf("ide-hd,bus=coffer-sata.%d", d.unit)
		case "ide":
			dev = fmt.Sprintf("ide-hd,bus=ide.%d,unit=%d", d.unit/2, d.unit%2)
		case "scsi":
			ctrl := fmt.Sprintf("coffer-scsi%d", d.ctrl)
			if !controllers[ctrl] {
				a = append(a, "-device", d.ctrlModel+",id="+ctrl)
			}
			controllers[ctrl] = true
			dev = fmt.Sprintf("scsi-hd,bus=%s.0,scsi-id=%d,lun=0", ctrl, d.unit)
		}
		dev += ",drive=" + drive
		if i == 0 && m.kernel == "" {
			dev += ",bootindex=0"
		}
		a = append(a, "-device", dev)
	}
	if m.agent {
		// IsolateArgs finds the agent's socket by this port's name.
		a = append(a, "-device", "virtio-serial-pci,id=coffer-vser",
			"-chardev", "socket,id=coffer-agent,path="+escape(spec.Dir+"/agent.sock")+",server=on,wait=off",
			"-device", "virtserialport,bus=coffer-vser.0,chardev=coffer-agent,name=org.qemu.guest_agent.0")
	}
	return append(a,
		"-chardev", "socket,id=coffer-relaunch-mon,path="+escape(spec.QMPPath())+",server=on,wait=off",
		"-mon", "chardev=coffer-relaunch-mon,mode=control",
		"-pidfile", spec.PIDPath(), "-daemonize", "-serial", "file:"+spec.ConsolePath()), nil
}

// libvirtMachineOf plans a libvirt point's machine on this host.
func libvirtMachineOf(ctx context.Context, snap *repo.Point, cfg hypervisor.VMConfig, probes []Probe) (machine, error) {
	h, err := probeHost(ctx)
	if err != nil {
		return machine{}, err
	}
	var keys []string
	for _, d := range snap.Disks {
		if d.Kind != hypervisor.KindMemory {
			keys = append(keys, d.Key)
		}
	}
	lm, err := planLibvirt(cfg, keys, h, probes)
	if err != nil {
		return machine{}, err
	}
	return machine{args: lm.args, nic: lm.nic, evidence: lm.evidence, noAgent: "the domain has no guest agent channel"}, nil
}

// fitHost keeps a machine's CPUs and memory as recorded, within what this
// host has: a guest boots the same with fewer, and a test boot must not
// starve the host.
func fitHost(cpus *int, memoryMB *int64, h hostQEMU, evidence map[string]string) {
	if h.cpus > 0 && *cpus > h.cpus {
		evidence["cpus"] = fmt.Sprintf("%d (recorded %d, this host has %d)", h.cpus, *cpus, h.cpus)
		*cpus = h.cpus
	}
	if *memoryMB <= 0 {
		*memoryMB = 512
	}
	if limit := h.memoryMB / 2; limit > 0 && *memoryMB > limit {
		evidence["memory_mib"] = fmt.Sprintf("%d (recorded %d, half of this host's memory)", limit, *memoryMB)
		*memoryMB = limit
	}
}
