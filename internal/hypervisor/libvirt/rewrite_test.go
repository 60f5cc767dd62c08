package libvirt

import (
	"strings"
	"testing"
)

func TestRewriteDomain(t *testing.T) {
	doc := `<domain type='kvm'>
  <name>web-1</name>
  <uuid>5f0c2a8e-6d3b-4b1f-9c2e-7a1d0e4b8c31</uuid>
  <memory unit='KiB'>262144</memory>
  <devices>
    <disk type='block' device='disk'>
      <driver name='qemu' type='raw' cache='none'/>
      <source dev='/dev/vg0/web-1'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='/var/lib/libvirt/images/web-1-data.qcow2'/>
      <backingStore type='file'><format type='qcow2'/><source file='/base.qcow2'/></backingStore>
      <target dev='vdb' bus='virtio'/>
    </disk>
    <disk type='file' device='cdrom'><source file='/iso/debian.iso'/><target dev='sda' bus='sata'/><readonly/></disk>
    <interface type='network'><mac address='52:54:00:aa:bb:cc'/><source network='default'/><model type='virtio'/></interface>
  </devices>
</domain>`
	got, err := rewriteDomain(doc, "web-1-copy", "11111111-2222-4333-8444-555555555555", map[string]newDisk{
		"vda": {Path: "/pool/web-1-copy-vda.qcow2", Format: "qcow2"},
		"vdb": {Path: "/pool/web-1-copy-vdb.qcow2", Format: "qcow2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	x, err := parseDomain(got)
	if err != nil {
		t.Fatalf("%v\n%s", err, got)
	}
	if x.Name != "web-1-copy" || x.UUID != "11111111-2222-4333-8444-555555555555" || strings.Count(got, "<uuid>") != 1 {
		t.Fatalf("name %q uuid %q:\n%s", x.Name, x.UUID, got)
	}
	want := map[string][3]string{ // target: type, path, format
		"vda": {"file", "/pool/web-1-copy-vda.qcow2", "qcow2"},
		"vdb": {"file", "/pool/web-1-copy-vdb.qcow2", "qcow2"},
		"sda": {"file", "/iso/debian.iso", ""},
	}
	for _, d := range x.Devices.Disks {
		w := want[d.Target.Dev]
		if d.Type != w[0] || d.path() != w[1] || d.Driver.Type != w[2] {
			t.Errorf("disk %s: type %s path %s format %s, want %v", d.Target.Dev, d.Type, d.path(), d.Driver.Type, w)
		}
	}
	if strings.Contains(got, "backingStore") || strings.Contains(got, "/dev/vg0") {
		t.Errorf("the original's storage is still referenced:\n%s", got)
	}
	if len(x.Devices.Interfaces) != 1 || x.Devices.Interfaces[0].MAC.Address == "52:54:00:aa:bb:cc" ||
		!strings.HasPrefix(x.Devices.Interfaces[0].MAC.Address, "52:54:00:") || x.Devices.Interfaces[0].Source.Network != "default" {
		t.Errorf("interface: %+v", x.Devices.Interfaces)
	}
	if !strings.Contains(got, "cache=\"none\"") || !strings.Contains(got, "<readonly></readonly>") {
		t.Errorf("settings coffer does not know were lost:\n%s", got)
	}
}

func TestTokensAndChains(t *testing.T) {
	a, b := chainPrefix("nightly@offsite"), chainPrefix("nightly@local")
	if !strings.HasPrefix(a, "coffer-nightly_offsite.") || a == b || chainPrefix("") != chainPrefix("default") {
		t.Fatalf("chain prefixes %q %q", a, b)
	}
	name, size, ok := parseToken(token(a+"inc-x", 1<<30))
	if !ok || name != a+"inc-x" || size != 1<<30 {
		t.Fatalf("token round trip: %q %d %v", name, size, ok)
	}
	for _, bad := range []string{"", "admin-cp@10", "coffer-x", "coffer-x@ten"} {
		if _, _, ok := parseToken(bad); ok {
			t.Errorf("token %q accepted", bad)
		}
	}
	pools := []pool{{"images", "/var/lib/libvirt/images"}, {"fast", "/var/lib/libvirt/images/fast"}}
	for path, want := range map[string]string{
		"/var/lib/libvirt/images/a.qcow2":      "images",
		"/var/lib/libvirt/images/fast/b.qcow2": "fast",
		"/var/lib/libvirt/imagesX/c.qcow2":     "dir:/var/lib/libvirt/imagesX",
	} {
		var d diskXML
		d.Source.File = path
		if got := datastoreOf(d, pools); got != want {
			t.Errorf("datastore of %s: %s, want %s", path, got, want)
		}
	}
}
