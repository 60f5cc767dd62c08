package crossrestore

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/libvirt"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/vmconfig"
)

// vsphereVM is a recorded vSphere VM as the connector records it.
func vsphereVM(guestID, firmware string, placed ...vmconfig.Disk) hypervisor.VMConfig {
	n, _ := json.Marshal(vmconfig.Native{GuestID: guestID, Disks: placed, BootDisk: placed[0].Key})
	cfg := hypervisor.VMConfig{Kind: "vsphere", Name: "web-vs", CPUs: 2, MemoryMiB: 2048, Firmware: firmware, Native: n,
		NICs: []hypervisor.NICConfig{{Key: "4000", Network: "VM Network", Model: "VirtualVmxnet3"}}}
	for i, d := range placed {
		cfg.Disks = append(cfg.Disks, hypervisor.DiskInfo{Key: d.Key, Name: "Hard disk " + string(rune('1'+i)), Size: int64(i+1) << 30, Datastore: "LocalDS_0"})
	}
	return cfg
}

// domainOf is the definition of a mapped libvirt plan, checked against
// libvirt's own schema where virt-xml-validate and xmllint are installed.
func domainOf(t *testing.T, p *Plan) string {
	t.Helper()
	var n libvirt.NativeConfig
	if err := json.Unmarshal(p.Config.Native, &n); err != nil {
		t.Fatal(err)
	}
	// The real libvirtd defines it in the restore tests (restorecmd).
	tool, err := exec.LookPath("virt-xml-validate")
	if _, lint := exec.LookPath("xmllint"); err == nil && lint == nil {
		f := filepath.Join(t.TempDir(), "d.xml")
		os.WriteFile(f, []byte(n.DomainXML), 0o600)
		if out, err := exec.Command(tool, f, "domain").CombinedOutput(); err != nil {
			t.Fatalf("libvirt's schema refuses the mapped domain: %v %s\n%s", err, out, n.DomainXML)
		}
	}
	return n.DomainXML
}

func TestVSphereOntoLibvirtKeepsVMwareDevices(t *testing.T) {
	cfg := vsphereVM("debian12_64Guest", "bios", vmconfig.Disk{Key: "2000", Controller: vmconfig.PVSCSI},
		vmconfig.Disk{Key: "2001", Controller: vmconfig.SATA, Unit: 0})
	p, err := Map(cfg, "libvirt", Options{Network: "default", Emulated: true})
	if err != nil {
		t.Fatal(err)
	}
	doc := domainOf(t, p)
	for _, want := range []string{`<domain type="qemu">`, `model="vmpvscsi"`, `<target dev="sda" bus="scsi">`, `<target dev="sdb" bus="sata">`,
		`<boot order="1">`, `<model type="vmxnet3">`, `<source network="default">`, `<vcpu>2</vcpu>`, `<memory unit="MiB">2048</memory>`} {
		if !strings.Contains(doc, want) {
			t.Errorf("the domain lacks %s:\n%s", want, doc)
		}
	}
	if p.DiskKeys["2000"] != "sda" || p.DiskKeys["2001"] != "sdb" || p.Config.Disks[1].Size != 2<<30 || p.Config.Kind != "libvirt" {
		t.Fatalf("keys %v, disks %+v", p.DiskKeys, p.Config.Disks)
	}
	if len(p.Report.Unmapped) != 0 || !strings.Contains(strings.Join(p.Report.Needs, "\n"), "vmw_pvscsi") {
		t.Fatalf("report: %+v", p.Report)
	}
}

func TestWindowsGuestOntoKVMNeedsVirtioDrivers(t *testing.T) {
	// An NVMe disk: QEMU under libvirt 9 has no NVMe disk bus, so it goes
	// on AHCI, and the report says so.
	cfg := vsphereVM("windows2019srv_64Guest", "efi", vmconfig.Disk{Key: "2000", Controller: vmconfig.LSILogicSAS},
		vmconfig.Disk{Key: "2001", Controller: vmconfig.NVMe})
	p, err := Map(cfg, "libvirt", Options{})
	if err != nil {
		t.Fatal(err)
	}
	doc := domainOf(t, p)
	if !strings.Contains(doc, `<os firmware="efi">`) || !strings.Contains(doc, `machine="q35"`) || !strings.Contains(doc, `model="lsisas1068"`) ||
		!strings.Contains(doc, `<domain type="kvm">`) {
		t.Fatalf("the domain:\n%s", doc)
	}
	needs := strings.Join(p.Report.Needs, "\n")
	if !strings.Contains(needs, "Windows guest") || !strings.Contains(needs, "virtio-win") || !strings.Contains(needs, "NetKVM") {
		t.Fatalf("needs: %v", p.Report.Needs)
	}
	if len(p.Report.Unmapped) != 1 || p.Report.Unmapped[0].Name != "Hard disk 2" || p.Report.Unmapped[0].From != "NVMe" ||
		p.Report.Unmapped[0].To != "SATA (AHCI)" {
		t.Fatalf("unmapped: %+v", p.Report.Unmapped)
	}
}

func TestQEMUOntoVSphere(t *testing.T) {
	cmd := []string{"qemu-system-x86_64", "-accel", "tcg", "-m", "256", "-kernel", "/boot/vmlinuz", "-initrd", "/boot/initrd",
		"-drive", "if=pflash,format=raw,readonly=on,file=/usr/share/OVMF/OVMF_CODE.fd",
		"-blockdev", "driver=qcow2,file=vda-file,node-name=vda", "-device", "virtio-blk-pci,drive=vda,id=vda",
		"-device", "virtio-scsi-pci,id=scsi0", "-device", "scsi-hd,drive=sdb,bus=scsi0.0,id=sdb",
		"-netdev", "user,id=n0", "-device", "virtio-net-pci,netdev=n0,id=net0", "-device", `{"driver":"e1000","netdev":"n1","id":"net1"}`}
	native, _ := json.Marshal(map[string]any{"cmdline": cmd})
	cfg := hypervisor.VMConfig{Kind: "qemu", Name: "web-1", CPUs: 1, MemoryMiB: 256, Native: native,
		Disks: []hypervisor.DiskInfo{{Key: "pflash1", Name: "pflash1", Size: 4 << 20}, {Key: "vda", Name: "vda", Size: 32 << 20},
			{Key: "sdb", Name: "sdb", Size: 16 << 20}}}
	p, err := Map(cfg, "vsphere", Options{Network: "VM Network"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := vmconfig.Parse(p.Config)
	if err != nil {
		t.Fatal(err)
	}
	want := []vmconfig.Disk{{Key: "vda", Controller: vmconfig.PVSCSI, Bus: 0, Unit: 0}, {Key: "sdb", Controller: vmconfig.PVSCSI, Bus: 0, Unit: 1}}
	if len(n.Disks) != 2 || n.Disks[0] != want[0] || n.Disks[1] != want[1] || n.BootDisk != "vda" || n.GuestID != "otherGuest64" {
		t.Fatalf("placement %+v", n)
	}
	if p.Config.Firmware != "efi" || len(p.Config.NICs) != 2 || p.Config.NICs[0].Model != "VirtualVmxnet3" || p.Config.NICs[1].Model != "VirtualE1000" ||
		p.Config.NICs[1].Network != "VM Network" {
		t.Fatalf("config %+v", p.Config)
	}
	if len(p.Report.Unmapped) != 2 || p.Report.Unmapped[0].Kind != "boot" || !strings.Contains(p.Report.Unmapped[0].From, "/boot/vmlinuz") ||
		p.Report.Unmapped[1].Name != "pflash1" {
		t.Fatalf("the kernel booted directly or the EFI variables are not reported: %+v", p.Report.Unmapped)
	}
	if _, ok := p.DiskKeys["pflash1"]; ok || len(p.Config.Disks) != 2 {
		t.Fatalf("the EFI variable store became a disk: %v", p.DiskKeys)
	}
	// Without a network, the adapters are reported left out.
	p, _ = Map(cfg, "vsphere", Options{})
	if len(p.Config.NICs) != 0 || len(p.Report.Unmapped) != 4 || !strings.Contains(p.Report.Unmapped[3].Note, "--network") {
		t.Fatalf("adapters without a network: %+v %+v", p.Config.NICs, p.Report.Unmapped)
	}
}

func TestLibvirtOntoVSphereWindows(t *testing.T) {
	doc := `<domain type='kvm'><name>win</name><metadata><libosinfo:libosinfo xmlns:libosinfo="http://libosinfo.org/xmlns/libvirt/domain/1.0">` +
		`<libosinfo:os id="http://microsoft.com/win/2k19"/></libosinfo:libosinfo></metadata>` +
		`<os><type machine='q35'>hvm</type><loader readonly='yes' type='pflash'>/usr/share/OVMF/OVMF_CODE_4M.fd</loader></os><devices>` +
		`<disk type='file' device='disk'><target dev='vda' bus='virtio'/></disk>` +
		`<disk type='file' device='cdrom'><target dev='sda' bus='sata'/></disk>` +
		`<interface type='network'><source network='default'/><model type='virtio'/></interface></devices></domain>`
	native, _ := json.Marshal(libvirt.NativeConfig{DomainXML: doc})
	cfg := hypervisor.VMConfig{Kind: "libvirt", Name: "win", CPUs: 4, MemoryMiB: 4096, Native: native,
		Disks: []hypervisor.DiskInfo{{Key: "vda", Name: "vda", Size: 40 << 30}}, NICs: []hypervisor.NICConfig{{Key: "net0", Network: "default", Model: "virtio"}}}
	p, err := Map(cfg, "vsphere", Options{})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := vmconfig.Parse(p.Config)
	if n.GuestID != "windows9Server64Guest" || n.Disks[0].Controller != vmconfig.LSILogicSAS || p.Config.Firmware != "efi" ||
		p.Config.NICs[0].Model != "VirtualE1000e" || p.Config.NICs[0].Network != "default" {
		t.Fatalf("a Windows domain on vSphere: %+v %+v", n, p.Config)
	}
	if !strings.Contains(strings.Join(p.Report.Needs, "\n"), "VMware Tools") {
		t.Fatalf("needs %v", p.Report.Needs)
	}
}

func TestRefused(t *testing.T) {
	cfg := vsphereVM("", "", vmconfig.Disk{Key: "2000", Controller: vmconfig.PVSCSI})
	if _, err := Map(cfg, "vsphere", Options{}); !errors.Is(err, ErrSamePlatform) {
		t.Fatalf("same platform: %v", err)
	}
	if _, err := Map(cfg, "fake", Options{}); !errors.Is(err, hypervisor.ErrUnsupported) {
		t.Fatalf("onto a platform coffer does not map onto: %v", err)
	}
	if _, err := Map(hypervisor.VMConfig{Kind: "libvirt", Native: []byte(`{}`)}, "vsphere", Options{}); err == nil {
		t.Fatal("a libvirt point without its domain definition mapped")
	}
}

func TestVSphereIntoQEMUDirectoryRelaunches(t *testing.T) {
	cfg := vsphereVM("debian12_64Guest", "bios", vmconfig.Disk{Key: "2000", Controller: vmconfig.PVSCSI},
		vmconfig.Disk{Key: "2001", Controller: vmconfig.LSILogic})
	p, err := Map(cfg, "qemu", Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	spec := qemu.LaunchSpec{Dir: dir, Name: "web-qemu", UUID: "5f0c2a8e-6d3b-4b1f-9c2e-7a1d0e4b8c31", Disks: map[string]qemu.LaunchDisk{
		"2000": {Path: filepath.Join(dir, "2000.raw"), Format: "raw"}, "2001": {Path: filepath.Join(dir, "2001.qcow2"), Format: "qcow2"}}}
	rl, err := qemu.RelaunchArgs(p.Config.Native, spec)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(rl.Args, " ")
	for _, want := range []string{"-device pvscsi,id=ctrl0", "scsi-hd,drive=drive-2000,id=disk-2000,bus=ctrl0.0,scsi-id=0,bootindex=0",
		"file=" + filepath.Join(dir, "2000.raw"), "format=qcow2,file=" + filepath.Join(dir, "2001.qcow2"),
		"-device ahci,id=ctrl1", "ide-hd,drive=drive-2001,id=disk-2001,bus=ctrl1.0", "vmxnet3,netdev=net0", "-m 2048", "-smp 2", "-machine pc"} {
		if !strings.Contains(line, want) {
			t.Errorf("the relaunched command line lacks %q:\n%s", want, line)
		}
	}
	if len(p.Report.Unmapped) != 1 || p.Report.Unmapped[0].From != "LSI Logic Parallel (53C1030)" {
		t.Fatalf("unmapped: %+v", p.Report.Unmapped)
	}
}
