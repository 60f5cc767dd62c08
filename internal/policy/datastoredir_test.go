package policy

import "testing"

func TestDatastoreDir(t *testing.T) {
	for _, c := range []struct {
		datastore string
		paths     []string
		want      string
	}{
		{"/srv/vms", []string{"/srv/vms/a.qcow2"}, "/srv/vms"},                                 // QEMU: the directory itself
		{"dir:/srv/vms/web", []string{"/srv/vms/web/vda.qcow2"}, "/srv/vms/web"},               // libvirt, outside any pool
		{"images", []string{"/srv/vms/web/vda.qcow2", "/srv/vms/db/vda.qcow2"}, "/srv/vms"},    // a pool: its disks' common directory
		{"images", []string{"/srv/vms/web/vda.qcow2", "/srv/vms/web/vdb.raw"}, "/srv/vms/web"}, // one directory
		{"images", []string{"/a/x.img", "/b/y.img"}, "images"},                                 // nothing in common but /
		{"images", []string{"relative/x.img"}, "images"},                                       // not a path
		{"images", nil, "images"},
	} {
		if got := DatastoreDir(c.datastore, c.paths); got != c.want {
			t.Errorf("DatastoreDir(%q, %q) = %q, want %q", c.datastore, c.paths, got, c.want)
		}
	}
	s := StorageSnapshots{{Name: "xfs", Kind: "reflink", Connections: []string{"lv"}, Datastores: []string{"/srv/vms"}}}
	if p, root, ok := s.ProviderOf("lv", "images", []string{"/srv/vms/web/vda.qcow2"}); !ok || p.Name != "xfs" || root != "/srv/vms" {
		t.Fatalf("pool images: %+v %q %v", p, root, ok)
	}
	if _, _, ok := s.ProviderOf("lv", "other", []string{"/srv/other/vda.qcow2"}); ok {
		t.Fatal("a pool outside the provider's datastores was covered")
	}
}
