package crossrestore

import (
	"strings"
)

// machine is a VM in platform-neutral terms.
type machine struct {
	name      string
	cpus      int
	memoryMiB int64
	firmware  string // "bios" or "efi"
	guest     guest
	disks     []disk
	nics      []nic
	// unread are items of the source that have no neutral form (a
	// kernel booted directly, an unknown controller).
	unread []Item
}

// The guest families whose needs differ on a new platform.
const (
	linuxGuest   = "linux"
	windowsGuest = "windows"
	otherGuest   = "" // not recorded
)

type guest struct {
	family string
	id     string // the source's own name for the guest OS ("" when none)
}

// The disk buses of the neutral machine: each an emulated device, so a
// guest's driver for it is the same on every platform that has it.
const (
	busVirtioBlk  = "virtio-blk"
	busVirtioSCSI = "virtio-scsi"
	busPVSCSI     = "pvscsi"       // VMware Paravirtual SCSI
	busLSISAS     = "lsilogic-sas" // LSI Logic SAS1068
	busLSIParal   = "lsilogic"     // VMware's LSI Logic Parallel (53C1030)
	busLSI895     = "lsi53c895a"   // QEMU's and libvirt's default SCSI (53C895A)
	busBusLogic   = "buslogic"
	busSATA       = "sata"
	busIDE        = "ide"
	busNVMe       = "nvme"
)

// busNames are the buses as the report names them.
var busNames = map[string]string{
	busVirtioBlk: "virtio-blk", busVirtioSCSI: "virtio-scsi", busPVSCSI: "VMware Paravirtual SCSI",
	busLSISAS: "LSI Logic SAS", busLSIParal: "LSI Logic Parallel (53C1030)", busLSI895: "LSI 53C895A SCSI",
	busBusLogic: "BusLogic", busSATA: "SATA (AHCI)", busIDE: "IDE", busNVMe: "NVMe",
}

func busName(b string) string {
	if n, ok := busNames[b]; ok {
		return n
	}
	return b
}

// disk is one disk: its key in the point, its size and where it sits.
type disk struct {
	key, name string
	size      int64
	datastore string
	bus       string
	boot      bool
}

// The network adapter models of the neutral machine.
const (
	nicVirtio  = "virtio"
	nicVmxnet3 = "vmxnet3"
	nicE1000   = "e1000"
	nicE1000e  = "e1000e"
	nicPCNet   = "pcnet"
	nicRTL8139 = "rtl8139"
)

type nic struct {
	key, network, model string
}

// guestFamily reads a guest OS name of any platform: a vSphere guest ID
// ("windows2019srv_64Guest", "debian12_64Guest") or a libosinfo ID
// ("http://microsoft.com/win/2k19", "http://debian.org/debian/12").
func guestFamily(id string) string {
	s := strings.ToLower(id)
	switch {
	case s == "":
		return otherGuest
	case strings.HasPrefix(s, "win") || strings.Contains(s, "microsoft.com/win"):
		return windowsGuest
	}
	for _, l := range []string{"linux", "debian", "ubuntu", "rhel", "centos", "sles", "fedora", "oracle", "rocky", "alma",
		"photon", "coreos", "opensuse", "suse", "archlinux", "alpine"} {
		if strings.Contains(s, l) {
			return linuxGuest
		}
	}
	return otherGuest
}
