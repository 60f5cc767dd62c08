package policy

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestReplicationValidate: a replication names its VMs, a qemu, libvirt
// or vsphere connection of the configuration, absolute directories (for
// vsphere: a storage map of datastores, no directory), a keep within
// bounds, an rpo of a minute or more and a schedule that parses; each
// problem is named.
func TestReplicationValidate(t *testing.T) {
	var mover yaml.Node
	if err := yaml.Unmarshal([]byte("{data-mover-vm: dr-mover}"), &mover); err != nil {
		t.Fatal(err)
	}
	c := &Config{Connections: []Connection{{Name: "dr", Kind: "libvirt"}, {Name: "vc", Kind: "vsphere", Options: *mover.Content[0]},
		{Name: "vc2", Kind: "vsphere"}, {Name: "nas", Kind: "nfs"}}}
	good := Replication{Name: "web-dr", VMs: []string{"web-*"}, Connection: "dr", Directory: "/srv/dr",
		Networks: map[string]string{"default": "dr-net"}, Keep: 3, Schedule: "*/15 * * * *"}
	if err := good.Validate(c); err != nil {
		t.Fatalf("a good replication: %v", err)
	}
	for want, edit := range map[string]func(r *Replication){
		"vms is missing":            func(r *Replication) { r.VMs = nil },
		"not a connection":          func(r *Replication) { r.Connection = "nope" },
		"qemu, libvirt and vsphere": func(r *Replication) { r.Connection = "nas" },
		"directory is missing":      func(r *Replication) { r.Directory = "" },
		"not an absolute path":      func(r *Replication) { r.Storage = map[string]string{"/a": "rel"} },
		"keep must be from 1 to 64": func(r *Replication) { r.Keep = 65 },
		"less than a minute":        func(r *Replication) { r.RPO = Duration(1e9) },
		"schedule":                  func(r *Replication) { r.Schedule = "every day" },
		"maps an empty name":        func(r *Replication) { r.Networks = map[string]string{"a": ""} },
	} {
		r := good
		edit(&r)
		if err := r.Validate(c); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
	vs := Replication{Name: "web-vs", VMs: []string{"web-*"}, Connection: "vc", Storage: map[string]string{"ds1": "dr-ds1"}}
	if err := vs.Validate(c); err != nil {
		t.Fatalf("a good vSphere replication: %v", err)
	}
	for want, edit := range map[string]func(r *Replication){
		"directory is for qemu and libvirt": func(r *Replication) { r.Directory = "/srv/dr" },
		"storage is missing":                func(r *Replication) { r.Storage = nil },
		"names no data-mover-vm":            func(r *Replication) { r.Connection = "vc2" },
		"maps an empty name":                func(r *Replication) { r.Storage = map[string]string{"ds1": ""} },
	} {
		r := vs
		edit(&r)
		if err := r.Validate(c); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("vSphere: %s: %v", want, err)
		}
	}
	if !good.Matches("web-01") || good.Matches("db-01") {
		t.Fatal("vms globs")
	}
	good.Storage = map[string]string{"/var/lib/libvirt/images": "/srv/ssd"}
	if d := good.StandbyDir("web-01", "/var/lib/libvirt/images"); d != "/srv/ssd/web-01" {
		t.Fatalf("storage map: %s", d)
	}
	if d := good.StandbyDir("web-01", "/elsewhere"); d != "/srv/dr/web-01" {
		t.Fatalf("directory: %s", d)
	}
	n, err := c.PutReplication(good)
	if err != nil || len(n.Replications) != 1 || len(c.Replications) != 0 {
		t.Fatalf("put: %v", err)
	}
	if n, err = n.DeleteReplication("web-dr"); err != nil || len(n.Replications) != 0 {
		t.Fatalf("delete: %v", err)
	}
}
