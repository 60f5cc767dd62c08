package policyfind

import (
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// policy check says, per datastore of a group: datastore policy, whether a
// provider covers it and can snapshot it here, and what happens otherwise.
func TestProviderFindings(t *testing.T) {
	good := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
	plain := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=0")
	cfg := &policy.Config{
		Connections:      []policy.Connection{{Name: "lab", Kind: "qemu"}},
		StorageSnapshots: policy.StorageSnapshots{{Name: "xfs", Kind: "reflink", Connections: []string{"lab"}, Datastores: []string{good, plain}}},
	}
	vm := func(name, ds string) hypervisor.VM {
		return hypervisor.VM{VMRef: hypervisor.VMRef{ID: name, Name: name}, Datastores: []string{ds}}
	}
	selected := []hypervisor.VM{vm("web-1", good), vm("web-2", good), vm("db-1", plain), vm("old-1", "/srv/elsewhere")}
	for _, tc := range []struct {
		fallback string
		then     string
	}{{"", "its VMs fail (storage-fallback: fail"}, {"vm", "its VMs are backed up one by one (storage-fallback: vm)"}} {
		p := policy.Policy{Name: "g", Connection: "lab", Group: "datastore", StorageFallback: tc.fallback}
		got := SelectionFindings(cfg, p, "lab", selected)
		var msgs []string
		for _, f := range got {
			msgs = append(msgs, f.Message)
		}
		all := strings.Join(msgs, "\n")
		if len(got) != 2 || strings.Contains(all, good+" ") {
			t.Fatalf("fallback %q: findings %q, want one for %s and one for /srv/elsewhere, none for %s", tc.fallback, all, plain, good)
		}
		for _, want := range []string{
			"datastore " + plain + " (1 VMs): provider xfs (reflink) cannot snapshot it, so " + tc.then,
			"reflink=1",
			"datastore /srv/elsewhere (1 VMs): no storage-snapshots provider covers it, so " + tc.then,
		} {
			if !strings.Contains(all, want) {
				t.Errorf("fallback %q: findings lack %q:\n%s", tc.fallback, want, all)
			}
		}
	}
}

// A vSphere datastore no provider covers: the finding says how to name it
// in an exec provider; one that an exec provider covers has no finding.
func TestProviderFindingsOfVSphereDatastores(t *testing.T) {
	cfg := &policy.Config{
		Connections: []policy.Connection{{Name: "vc", Kind: "vsphere"}},
		StorageSnapshots: policy.StorageSnapshots{{Name: "array", Kind: "exec", Connections: []string{"vc"},
			Datastores: []string{"[gold-01]"}, Command: []string{"/bin/true"}}},
	}
	vm := func(name, ds string) hypervisor.VM {
		return hypervisor.VM{VMRef: hypervisor.VMRef{ID: name, Name: name}, Datastores: []string{ds},
			Disks: []hypervisor.DiskInfo{{Key: "2000", Path: "[" + ds + "] " + name + "/" + name + ".vmdk", Datastore: ds}}}
	}
	p := policy.Policy{Name: "g", Connection: "vc", Group: "datastore"}
	got := SelectionFindings(cfg, p, "vc", []hypervisor.VM{vm("web-1", "gold-01"), vm("db-1", "silver-02")})
	if len(got) != 1 || !strings.Contains(got[0].Message, `datastore silver-02 (1 VMs): no storage-snapshots provider covers it`) ||
		!strings.Contains(got[0].Message, `add "[silver-02]" to the datastores of an exec provider`) {
		t.Fatalf("findings: %+v", got)
	}
}
