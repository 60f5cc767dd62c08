package libvirt

import (
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// TestTestCopyIsIsolated: a test copy's definition runs on its overlays
// only (a disk the replication does not keep is left out, a CD-ROM
// stays), has no interface, serial port, console, graphics or metadata
// of the source's, and gets one NIC per interface (same model and MAC)
// on QEMU's restricted user-mode network, at the interface's PCI address,
// the probes' ports forwarded from 127.0.0.1 to the first; its console
// goes to the run's log. An interface without a PCI address is refused.
func TestTestCopyIsIsolated(t *testing.T) {
	doc := `<domain type='kvm'><name>web-1</name><uuid>5f0c2a8e-6d3b-4b1f-9c2e-7a1d0e4b8c31</uuid>
<metadata><app:tag xmlns:app='https://example.com/app'>prod</app:tag></metadata><devices>
<disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source file='/images/web-1.qcow2'/><target dev='vda' bus='virtio'/></disk>
<disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='/images/web-1-scratch.raw'/><target dev='vdb' bus='virtio'/></disk>
<disk type='file' device='cdrom'><source file='/iso/tools.iso'/><target dev='sda' bus='sata'/><readonly/></disk>
<interface type='network'><mac address='52:54:00:aa:bb:cc'/><source network='default'/><model type='virtio'/><address type='pci' domain='0x0000' bus='0x00' slot='0x03' function='0x0'/></interface>
<interface type='bridge'><mac address='52:54:00:aa:bb:dd'/><source bridge='br-prod'/><model type='e1000'/><address type='pci' domain='0x0000' bus='0x01' slot='0x00' function='0x0'/></interface>
<serial type='file'><source path='/var/log/web-1.log'/><target port='0'/></serial>
<console type='pty'><target type='serial' port='0'/></console>
<channel type='unix'><source mode='bind' path='/run/prod/web-1.agent'/><target type='virtio' name='org.qemu.guest_agent.0'/></channel>
<graphics type='vnc' port='5901' autoport='no'/>
</devices></domain>`
	cp := hypervisor.TestCopy{Name: hypervisor.TestCopyPrefix + "ab12cd34-web-1", UUID: "11111111-2222-4333-8444-555555555555",
		Disks: map[string]string{"vda": "/dr/web-1/.test-ab12/vda.qcow2"}, Forward: map[int]int{8080: 40080, 22: 40022},
		ConsoleLog: "/dr/web-1/.test-ab12/console.log"}
	got, err := testCopyXML(doc, cp)
	if err != nil {
		t.Fatal(err)
	}
	x, err := parseDomain(got)
	if err != nil {
		t.Fatalf("%v\n%s", err, got)
	}
	if x.Name != cp.Name || len(x.Devices.Interfaces) != 0 {
		t.Fatalf("the copy's name or interfaces:\n%s", got)
	}
	for _, want := range []string{"/dr/web-1/.test-ab12/vda.qcow2", "/iso/tools.iso", cp.UUID,
		`<serial type='file'><source path='/dr/web-1/.test-ab12/console.log'/>`,
		`xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'`,
		`<qemu:arg value='user,id=coffer-iso0,restrict=on,hostfwd=tcp:127.0.0.1:40022-:22,hostfwd=tcp:127.0.0.1:40080-:8080'/>`,
		`<qemu:arg value='virtio-net-pci,netdev=coffer-iso0,mac=52:54:00:aa:bb:cc,bus=pci.0,addr=0x3.0'/>`,
		`<qemu:arg value='user,id=coffer-iso1,restrict=on'/>`, `<qemu:arg value='e1000,netdev=coffer-iso1,mac=52:54:00:aa:bb:dd,bus=pci.1,addr=0x0.0'/>`,
		"org.qemu.guest_agent.0"} {
		if !strings.Contains(got, want) {
			t.Errorf("the copy lacks %s:\n%s", want, got)
		}
	}
	noAddress := strings.Replace(doc, "<address type='pci' domain='0x0000' bus='0x01' slot='0x00' function='0x0'/>", "", 1)
	if _, err := testCopyXML(noAddress, cp); err == nil || !strings.Contains(err.Error(), "interface 2 has no PCI address") {
		t.Errorf("an interface without a PCI address: %v", err)
	}
	for _, never := range []string{"/images/web-1", "/var/log/web-1.log", "/run/prod", "5901", "vnc", "<console", "5f0c2a8e", "example.com", "br-prod"} {
		if strings.Contains(got, never) {
			t.Errorf("the copy keeps %s of production:\n%s", never, got)
		}
	}
}
