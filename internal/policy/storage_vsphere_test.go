package policy

import (
	"strings"
	"testing"
)

// TestStorageProviderOfVSphereDatastores: an exec provider names vSphere
// datastores as "[name]" and covers exactly those; other kinds cannot.
func TestStorageProviderOfVSphereDatastores(t *testing.T) {
	c, err := load(t, "connections: [{name: vc, kind: fake}]\n"+
		"storage-snapshots:\n  - {name: array, kind: exec, connections: [vc], datastores: [\"[gold 01]\", /mnt/nfs], command: [/bin/true]}\n")
	if err != nil {
		t.Fatal(err)
	}
	ss := c.StorageSnapshots
	for _, tc := range []struct {
		ds    string
		paths []string
		root  string
	}{
		{"gold 01", []string{"[gold 01] web/web.vmdk", "[gold 01] web/web_1.vmdk"}, "[gold 01]"},
		{"gold 01", nil, ""},                              // no disk says it is a vSphere datastore
		{"gold 02", []string{"[gold 02] db/db.vmdk"}, ""}, // not covered
		{"gold", []string{"[gold 01] web/web.vmdk"}, ""},  // a disk on another datastore
		{"[gold 01]", []string{"[gold 01] a/a.vmdk"}, "[gold 01]"},
	} {
		_, root, ok := ss.ProviderOf("vc", tc.ds, tc.paths)
		if root != tc.root || ok != (tc.root != "") {
			t.Errorf("datastore %q with disks %v: covered as %q (%v), want %q", tc.ds, tc.paths, root, ok, tc.root)
		}
	}
	for path, want := range map[string][2]string{"[gold 01] web/web.vmdk": {"[gold 01]", "web/web.vmdk"}, "[a] b": {"[a]", "b"}} {
		e, rel, ok := VSpherePath(path)
		if !ok || e != want[0] || rel != want[1] {
			t.Errorf("VSpherePath(%q) = %q %q %v", path, e, rel, ok)
		}
	}
	for _, bad := range []string{"/srv/vm.vmdk", "[] x", "[a]b", "gold 01"} {
		if _, _, ok := VSpherePath(bad); ok {
			t.Errorf("VSpherePath(%q) accepted", bad)
		}
	}
	_, err = load(t, "connections: [{name: vc, kind: fake}]\n"+
		"storage-snapshots:\n  - {name: x, kind: reflink, connections: [vc], datastores: [\"[gold]\"]}\n")
	if err == nil || !strings.Contains(err.Error(), "[gold] is a vSphere datastore, which only kind: exec can snapshot") {
		t.Fatalf("a reflink provider of a vSphere datastore: %v", err)
	}
}
