package bootverify

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
)

// libvirtConfig is a recorded libvirt point with a domain XML whose <os>
// and <devices> are os and devices.
func libvirtConfig(os, devices string, nics ...string) hypervisor.VMConfig {
	doc := fmt.Sprintf(`<domain type='kvm'><name>app</name><os>%s</os><devices>%s</devices></domain>`, os, devices)
	native, _ := json.Marshal(map[string]string{"domain_xml": doc, "uri": "qemu:///system"})
	cfg := hypervisor.VMConfig{Kind: "libvirt", Name: "app", UUID: "6a1e1f0e-3b5c-4d2e-8f10-0a1b2c3d4e5f", CPUs: 2, MemoryMiB: 256, Native: native}
	for _, n := range nics {
		cfg.NICs = append(cfg.NICs, hypervisor.NICConfig{Model: n})
	}
	return cfg
}

// libvirtHost emulates what the libvirt mapping uses, with OVMF.
func libvirtHost() hostQEMU {
	h := fullHost()
	for _, d := range []string{"virtio-blk-pci", "virtio-scsi-pci", "lsi53c895a", "virtio-net-pci"} {
		h.devices[d] = true
	}
	return h
}

const (
	pcOS  = `<type arch='x86_64' machine='pc-i440fx-7.2'>hvm</type>`
	q35OS = `<type arch='x86_64' machine='pc-q35-7.2'>hvm</type>`
)

// TestPlanLibvirt maps a q35 domain with EFI, a SATA boot disk (by its
// boot order), a disk on a virtio-scsi controller, a CD-ROM the point does
// not hold and a guest agent channel, and checks the command line.
func TestPlanLibvirt(t *testing.T) {
	devices := `<disk type='file' device='disk'><target dev='sdb' bus='scsi'/><address type='drive' controller='1' bus='0' target='0' unit='3'/></disk>
<disk type='file' device='cdrom'><target dev='sdc' bus='sata'/><readonly/></disk>
<disk type='file' device='disk'><target dev='sda' bus='sata'/><boot order='1'/><address type='drive' controller='0' bus='0' target='0' unit='0'/></disk>
<controller type='scsi' index='1' model='virtio-scsi'/>
<channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0'/></channel>`
	m, err := planLibvirt(libvirtConfig(`<type arch='x86_64' machine='pc-q35-7.2'>hvm</type><loader readonly='yes' type='pflash'>/usr/share/OVMF/OVMF_CODE_4M.fd</loader>`, devices, "virtio"),
		[]string{"sdb", "sda"}, libvirtHost(), []Probe{{Kind: ProbeHTTP, Port: 80, Path: "/", Status: 200}, {Kind: ProbeExec, Command: []string{"true"}}})
	if err != nil {
		t.Fatal(err)
	}
	if m.machineType != "q35" || m.efi == nil || !m.agent || m.nic != "virtio-net-pci" ||
		m.evidence["boot_disk"] != "sda" || m.evidence["disks"] != "sdb: scsi -> virtio-scsi-pci unit 3; sda: sata -> ahci port 0" {
		t.Fatalf("plan: %+v", m)
	}
	m.efi = &efiFirmware{code: "/fw/CODE.fd"} // no variable store to copy
	args, err := m.args(qemu.LaunchSpec{Dir: t.TempDir(), Name: "v", Disks: map[string]qemu.LaunchDisk{"sda": {Path: "/o/sda", Format: "qcow2"}, "sdb": {Path: "/o/sdb", Format: "qcow2"}}})
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(args, " ")
	for _, want := range []string{"-machine q35", "-device ahci,id=coffer-sata", "ide-hd,bus=coffer-sata.0,drive=coffer-disk-sda,bootindex=0",
		"-device virtio-scsi-pci,id=coffer-scsi1", "scsi-hd,bus=coffer-scsi1.0,scsi-id=3,lun=0,drive=coffer-disk-sdb",
		"virtserialport,bus=coffer-vser.0,chardev=coffer-agent,name=org.qemu.guest_agent.0", "-bios /fw/CODE.fd"} {
		if !strings.Contains(line, want) {
			t.Errorf("command line lacks %q:\n%s", want, line)
		}
	}
	iso := qemu.IsolateArgs(args, qemu.IsolateSpec{})
	if !strings.HasSuffix(iso.AgentSocket, "/agent.sock") {
		t.Errorf("isolated agent socket %q", iso.AgentSocket)
	}
}

// TestPlanLibvirtCannotVerify: each domain local QEMU cannot boot as
// libvirt does gets its reason, as a CannotVerifyError.
func TestPlanLibvirtCannotVerify(t *testing.T) {
	vda := `<disk type='file' device='disk'><target dev='vda' bus='virtio'/></disk>`
	http := []Probe{{Kind: ProbeHTTP, Port: 80, Path: "/", Status: 200}}
	noOVMF := libvirtHost()
	noOVMF.efi = efiFirmware{}
	for _, c := range []struct {
		name, os, devices string
		nics              []string
		host              hostQEMU
		probes            []Probe
		want              string
	}{
		{"arm", `<type arch='aarch64' machine='virt'>hvm</type>`, vda, nil, libvirtHost(), nil, "architecture is aarch64"},
		{"efi without ovmf", `<type arch='x86_64'>hvm</type><loader type='pflash'>/x</loader>`, vda, nil, noOVMF, nil, "install the ovmf package"},
		{"kernel elsewhere", pcOS + `<kernel>/nonexistent/vmlinuz</kernel>`, vda, nil, libvirtHost(), nil, "not in the backup and not on this host"},
		{"usb disk", pcOS, `<disk device='disk'><target dev='sda' bus='usb'/></disk>`, nil, libvirtHost(), nil, `"usb" bus`},
		{"ide on q35", q35OS, `<disk device='disk'><target dev='hda' bus='ide'/></disk>`, nil, libvirtHost(), nil, "IDE unit 0 of a q35 machine"},
		{"sata port 6", pcOS, `<disk device='disk'><target dev='sdg' bus='sata'/></disk>`, nil, libvirtHost(), nil, "ports 0 to 5"},
		{"megasas", pcOS, `<disk device='disk'><target dev='sda' bus='scsi'/></disk><controller type='scsi' index='0' model='megasas'/>`, nil, libvirtHost(), nil, `model "megasas"`},
		{"exec without agent", pcOS, vda, nil, libvirtHost(), []Probe{{Kind: ProbeExec, Command: []string{"true"}}}, "no guest agent channel"},
		{"probe without nic", pcOS, vda, nil, libvirtHost(), http, "no network interface"},
		{"probe on ne2k", pcOS, vda, []string{"ne2k_pci"}, libvirtHost(), http, "none of its interface models (ne2k_pci)"},
	} {
		_, err := planLibvirt(libvirtConfig(c.os, c.devices, c.nics...), []string{"vda", "sda", "hda", "sdg"}, c.host, c.probes)
		var cv *CannotVerifyError
		if !errors.As(err, &cv) || !strings.Contains(cv.Reason, c.want) {
			t.Errorf("%s: %v, want cannot verify locally: ...%s...", c.name, err, c.want)
		}
	}
}
