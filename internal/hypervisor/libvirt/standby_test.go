package libvirt

import (
	"strings"
	"testing"
)

// TestStandbyDefinitionMapsNetworks: a standby's definition keeps the
// interfaces' MAC addresses, puts each interface on the DR site's network
// or bridge the map names, and refuses an interface the map does not name.
func TestStandbyDefinitionMapsNetworks(t *testing.T) {
	doc := `<domain type='kvm'><name>web-1</name><uuid>5f0c2a8e-6d3b-4b1f-9c2e-7a1d0e4b8c31</uuid><devices>
<disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source file='/images/web-1.qcow2'/><target dev='vda' bus='virtio'/></disk>
<interface type='network'><mac address='52:54:00:aa:bb:cc'/><source network='default'/><model type='virtio'/></interface>
<interface type='bridge'><mac address='52:54:00:aa:bb:dd'/><source bridge='br-prod'/><model type='virtio'/></interface>
</devices></domain>`
	id := &identity{name: "web-1-standby", uuid: "11111111-2222-4333-8444-555555555555", keepMACs: true,
		networks: map[string]string{"default": "dr-net", "br-prod": "br-dr"}}
	got, err := rewriteXML(doc, id, map[string]newDisk{"vda": {Path: "/dr/web-1/disk-vda-active.qcow2", Format: "qcow2"}})
	if err != nil {
		t.Fatal(err)
	}
	x, err := parseDomain(got)
	if err != nil {
		t.Fatalf("%v\n%s", err, got)
	}
	if x.Name != "web-1-standby" || len(x.Devices.Interfaces) != 2 || len(x.Devices.Disks) != 1 {
		t.Fatalf("standby definition:\n%s", got)
	}
	nics := x.Devices.Interfaces
	if nics[0].Source.Network != "dr-net" || nics[1].Source.Bridge != "br-dr" {
		t.Errorf("networks not mapped: %+v", nics)
	}
	if nics[0].MAC.Address != "52:54:00:aa:bb:cc" || nics[1].MAC.Address != "52:54:00:aa:bb:dd" {
		t.Errorf("a standby's MAC addresses changed: %+v", nics)
	}
	if x.Devices.Disks[0].Source.File != "/dr/web-1/disk-vda-active.qcow2" {
		t.Errorf("disk: %+v", x.Devices.Disks[0])
	}

	id.networks = map[string]string{"default": "dr-net"}
	if _, err := rewriteXML(doc, id, nil); err == nil || !strings.Contains(err.Error(), `bridge "br-prod" is not in the networks map`) {
		t.Fatalf("an unmapped bridge: %v", err)
	}
}
