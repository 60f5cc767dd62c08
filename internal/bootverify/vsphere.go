package bootverify

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/vmconfig"
)

// CannotVerifyError is a point that local QEMU cannot boot the way its
// own hypervisor does: its guest needs a device QEMU does not emulate, or
// this host lacks what the VM's firmware needs. Booting it anyway would
// fail for a reason that is not the point's, so the verdict says so
// instead of "does not boot".
type CannotVerifyError struct{ Reason string }

func (e *CannotVerifyError) Error() string { return "cannot verify locally: " + e.Reason }

func cannotVerify(format string, a ...any) error {
	return &CannotVerifyError{Reason: fmt.Sprintf(format, a...)}
}

// scsiControllers are the SCSI controllers QEMU emulates as VMware
// presents them: the guest finds its disks with the driver it already
// uses under vSphere (Linux vmw_pvscsi and mptsas, Windows pvscsi and
// LSI_SAS).
var scsiControllers = map[string]string{vmconfig.PVSCSI: "pvscsi", vmconfig.LSILogicSAS: "mptsas1068"}

// unemulated says why a controller QEMU lacks cannot stand in: the guest
// boots through that controller's own driver.
var unemulated = map[string]string{
	vmconfig.LSILogic: "an LSI Logic Parallel (53C1030) controller, which QEMU does not emulate: the guest boots " +
		"through its driver for it (Linux mptspi, Windows LSI_SCSI), which would find no disk",
	vmconfig.BusLogic: "a BusLogic controller, which QEMU does not emulate: the guest boots through its driver for it, " +
		"which would find no disk",
}

// nicModels are the network adapters QEMU emulates as VMware presents
// them; the probes reach the guest through the first of them.
var nicModels = map[string]string{"VirtualVmxnet3": "vmxnet3", "VirtualE1000": "e1000", "VirtualE1000e": "e1000e",
	"VirtualPCNet32": "pcnet"}

// vmwareMachine is a vSphere point's VM as QEMU starts it: VMware's
// virtual hardware mapped, device by device, to what QEMU emulates the
// same way, so the guest's own drivers find its disks.
type vmwareMachine struct {
	name, uuid string
	cpus       int
	memoryMB   int64
	efi        *efiFirmware
	disks      []vmconfig.Disk
	bootDisk   string
	nic        string // the probes' adapter ("" for none)
	evidence   map[string]string
}

// planVSphere maps cfg to a QEMU machine on host h for probes. A
// *CannotVerifyError says why the VM cannot run as its guest expects, or
// why the probes cannot reach it.
func planVSphere(cfg hypervisor.VMConfig, h hostQEMU, probes []Probe) (*vmwareMachine, error) {
	native, err := vmconfig.Parse(cfg)
	if err != nil {
		return nil, err
	}
	withNetwork := false
	for _, p := range probes {
		if p.Kind == ProbeExec {
			// The request, not the point: nothing is recorded.
			return nil, fmt.Errorf("probe %s runs through QEMU's guest agent, and a vSphere guest's agent is VMware Tools, "+
				"which QEMU cannot reach: verify the point with tcp and http probes: %w", p, hypervisor.ErrUnsupported)
		}
		withNetwork = true
	}
	m := &vmwareMachine{name: cfg.Name, uuid: native.BIOSUUID, cpus: max(cfg.CPUs, 1), memoryMB: cfg.MemoryMiB,
		evidence: map[string]string{}}
	if len(native.Disks) == 0 {
		return nil, cannotVerify("the point does not record its disks' controllers (it was taken by a coffer older than " +
			"boot verification of vSphere points): back the VM up again and verify the new point")
	}
	// The firmware.
	switch cfg.Firmware {
	case "", "bios":
		m.evidence["firmware"] = "BIOS (SeaBIOS)"
	case "efi":
		if h.efi.code == "" {
			return nil, cannotVerify("the VM boots with EFI firmware and this host has no OVMF (install the ovmf package)")
		}
		m.efi = &h.efi
		m.evidence["firmware"] = "EFI (" + h.efi.code + "); VMware's boot entries are not in the backup, so the guest " +
			"boots through its removable-media path (\\EFI\\BOOT\\BOOTX64.EFI)"
	default:
		return nil, cannotVerify("the VM's firmware %q has no QEMU equivalent", cfg.Firmware)
	}
	// The disks: every one, on a controller the guest drives as it does
	// under vSphere.
	var mapped []string
	for _, d := range native.Disks {
		dev, err := diskDevice(d, h)
		if err != nil {
			return nil, err
		}
		m.disks = append(m.disks, d)
		mapped = append(mapped, fmt.Sprintf("%s: %s %d:%d -> %s", d.Key, d.Controller, d.Bus, d.Unit, dev))
	}
	m.bootDisk = native.Disks[0].Key
	if native.BootDisk != "" && slices.ContainsFunc(native.Disks, func(d vmconfig.Disk) bool { return d.Key == native.BootDisk }) {
		m.bootDisk = native.BootDisk
	}
	if m.efi != nil {
		if err := efiCanBootFrom(native.Disks, m.bootDisk); err != nil {
			return nil, err
		}
	}
	m.evidence["disks"] = strings.Join(mapped, "; ")
	m.evidence["boot_disk"] = m.bootDisk
	// The network: none, unless the probes need it; then the VM's own
	// adapter model, on the isolated user-mode network.
	if withNetwork {
		if len(cfg.NICs) == 0 {
			return nil, cannotVerify("the probes reach the guest over its network, and the VM has no network adapter: verify it without tcp and http probes")
		}
		for _, n := range cfg.NICs {
			if model := nicModels[n.Model]; model != "" && h.devices[model] {
				m.nic = model
				break
			}
		}
		if m.nic == "" {
			return nil, cannotVerify("the probes reach the guest over its network, and QEMU here emulates none of its adapters (%s): "+
				"verify it without tcp and http probes", nicList(cfg.NICs))
		}
		m.evidence["network_adapter"] = m.nic
	}
	fitHost(&m.cpus, &m.memoryMB, h, m.evidence)
	return m, nil
}

// efiSCSIUndriven are the SCSI controllers whose disks OVMF does not
// see: Debian 12's OVMF (2022.11) has no driver for either (its shell
// maps no disk behind them, measured with QEMU 7.2), so an EFI guest
// booting from one would fail at step 3 for a reason of this host's.
// The guest's own kernel drives them; only the firmware's read of the
// EFI System Partition cannot. (Firmware builds with PvScsiDxe and
// MptScsiDxe exist; coffer does not probe for them yet.)
var efiSCSIUndriven = map[string]string{vmconfig.PVSCSI: "VMware Paravirtual SCSI", vmconfig.LSILogicSAS: "LSI Logic SAS"}

// efiCanBootFrom refuses an EFI VM whose boot disk is on a controller
// the firmware cannot read.
func efiCanBootFrom(disks []vmconfig.Disk, boot string) error {
	for _, d := range disks {
		if kind, ok := efiSCSIUndriven[d.Controller]; ok && d.Key == boot {
			return cannotVerify("the VM boots with EFI firmware from disk %s on a %s controller, and this host's OVMF has no "+
				"driver for that controller: it would find no disk to boot (its data disks may stay there; a boot disk "+
				"on SATA, IDE or NVMe verifies)", d.Key, kind)
		}
	}
	return nil
}

// diskDevice checks that QEMU here can present d as VMware does and
// names the device it uses.
func diskDevice(d vmconfig.Disk, h hostQEMU) (string, error) {
	need := func(devs ...string) error {
		for _, dev := range devs {
			if !h.devices[dev] {
				return cannotVerify("disk %s is on a %s controller and this host's QEMU lacks the %s device it needs", d.Key, d.Controller, dev)
			}
		}
		return nil
	}
	switch d.Controller {
	case vmconfig.PVSCSI, vmconfig.LSILogicSAS:
		return scsiControllers[d.Controller], need(scsiControllers[d.Controller], "scsi-hd")
	case vmconfig.SATA:
		if d.Unit > 5 { // QEMU's AHCI controller has six ports
			return "", cannotVerify("disk %s is on SATA port %d; QEMU's AHCI controller has ports 0 to 5", d.Key, d.Unit)
		}
		return "ahci", need("ahci", "ide-hd")
	case vmconfig.IDE:
		if d.Bus > 1 || d.Unit > 1 {
			return "", cannotVerify("disk %s is on IDE %d:%d; the chipset's IDE controller has channels 0 and 1, units 0 and 1", d.Key, d.Bus, d.Unit)
		}
		return "ide (the chipset's)", need("ide-hd")
	case vmconfig.NVMe:
		return "nvme", need("nvme", "nvme-ns")
	}
	if why, ok := unemulated[d.Controller]; ok {
		return "", cannotVerify("disk %s is on %s", d.Key, why)
	}
	return "", cannotVerify("disk %s is on a controller of kind %q, which QEMU does not emulate", d.Key, d.Controller)
}

func nicList(nics []hypervisor.NICConfig) string {
	var out []string
	for _, n := range nics {
		out = append(out, n.Model)
	}
	return strings.Join(out, ", ")
}

// args is the machine's command line for spec, in the form RelaunchArgs
// gives a QEMU point (monitor, pid file, daemonized, console to a file),
// so that IsolateArgs turns both into a test boot the same way.
func (m *vmwareMachine) args(spec qemu.LaunchSpec) ([]string, error) {
	a, err := machineStart("pc", spec, m.uuid, m.cpus, m.memoryMB, m.efi)
	if err != nil {
		return nil, err
	}
	controllers := map[string]bool{}
	for _, d := range m.disks {
		ld, ok := spec.Disks[d.Key]
		if !ok {
			return nil, fmt.Errorf("no overlay for disk %s", d.Key)
		}
		drive := "coffer-disk-" + d.Key
		a = append(a, "-drive", fmt.Sprintf("if=none,id=%s,format=%s,file=%s", drive, ld.Format, escape(ld.Path)))
		ctrl := fmt.Sprintf("coffer-%s%d", d.Controller, d.Bus)
		var dev string
		switch d.Controller {
		case vmconfig.PVSCSI, vmconfig.LSILogicSAS:
			if !controllers[ctrl] {
				a = append(a, "-device", scsiControllers[d.Controller]+",id="+ctrl)
			}
			dev = fmt.Sprintf("scsi-hd,bus=%s.0,scsi-id=%d,lun=0", ctrl, d.Unit)
		case vmconfig.SATA:
			if !controllers[ctrl] {
				a = append(a, "-device", "ahci,id="+ctrl)
			}
			dev = fmt.Sprintf("ide-hd,bus=%s.%d", ctrl, d.Unit)
		case vmconfig.IDE:
			dev = fmt.Sprintf("ide-hd,bus=ide.%d,unit=%d", d.Bus, d.Unit)
		case vmconfig.NVMe:
			if !controllers[ctrl] {
				a = append(a, "-device", fmt.Sprintf("nvme,id=%s,serial=coffer%d", ctrl, d.Bus))
			}
			dev = fmt.Sprintf("nvme-ns,bus=%s,nsid=%d", ctrl, d.Unit+1)
		default:
			return nil, errors.New("unplanned controller " + d.Controller)
		}
		controllers[ctrl] = true
		dev += ",drive=" + drive
		if d.Key == m.bootDisk {
			dev += ",bootindex=0"
		}
		a = append(a, "-device", dev)
	}
	return append(a,
		"-chardev", "socket,id=coffer-relaunch-mon,path="+escape(spec.QMPPath())+",server=on,wait=off",
		"-mon", "chardev=coffer-relaunch-mon,mode=control",
		"-pidfile", spec.PIDPath(), "-daemonize", "-serial", "file:"+spec.ConsolePath()), nil
}

// escape quotes commas in a QemuOpts value.
func escape(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// machineStart is the start of a mapped machine's command line and its
// firmware: EFI with a copy of its variable store in the run's directory,
// or QEMU's BIOS. The accelerator is TCG: it runs wherever QEMU does,
// nested virtualisation included, and -cpu max gives the guest the
// instruction sets a current distribution requires.
func machineStart(machineType string, spec qemu.LaunchSpec, uuid string, cpus int, memoryMB int64, efi *efiFirmware) ([]string, error) {
	a := []string{qemuBinary, "-machine", machineType, "-accel", "tcg", "-cpu", "max", "-smp", fmt.Sprint(cpus),
		"-m", fmt.Sprint(memoryMB), "-name", spec.Name, "-nodefaults", "-vga", "std", "-display", "none"}
	if uuid != "" {
		a = append(a, "-uuid", uuid)
	}
	if efi == nil {
		return a, nil
	}
	if efi.vars == "" {
		return append(a, "-bios", efi.code), nil
	}
	vars := efiVarsPath(spec.Dir)
	if err := copyFile(efi.vars, vars); err != nil {
		return nil, fmt.Errorf("EFI variable store: %w", err)
	}
	return append(a, "-drive", "if=pflash,format=raw,readonly=on,file="+escape(efi.code),
		"-drive", "if=pflash,format=raw,file="+escape(vars)), nil
}
