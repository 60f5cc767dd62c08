package engine

import (
	"context"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/fake"
	"github.com/coffer-backup/coffer/internal/policy"
)

func TestSetWorkersRefusesBadWorkers(t *testing.T) {
	d := newDispatcher(4)
	for _, ws := range [][]Worker{{{Slots: 1}}, {{Name: "a", Slots: 1}, {Name: "a", Slots: 2}}, {{Name: "a"}}} {
		if err := d.setWorkers(ws); err == nil {
			t.Errorf("%+v accepted", ws)
		}
	}
}

func TestUnreachedNamesWhatIsMissing(t *testing.T) {
	cfg := &policy.Config{Connections: []policy.Connection{{Name: "kvm", Kind: "libvirt"}, {Name: "vc", Kind: "vsphere"}}}
	vm := hypervisor.VM{VMRef: hypervisor.VMRef{Name: "db1"}, Host: "kvm7"}
	ws := []Worker{
		{Name: "a", Slots: 1, Reach: Reach{Connections: []string{"kvm", "vc"}, Hosts: []string{"kvm/kvm1"}}},
		{Name: "b", Slots: 1, Reach: Reach{Connections: []string{"kvm"}, Hosts: []string{"kvm/kvm7"}, Repositories: []string{"local"}}},
	}
	p := policy.Policy{Name: "p", Repository: "s3"}
	for _, c := range []struct {
		conn string
		ws   []Worker
		want string
	}{
		{"kvm", ws, "no worker reaches repository s3"},
		{"kvm", ws[:1], "no worker reaches host kvm7"},
		{"vc", ws, ""}, // vSphere: any worker with the connection, whatever its hosts
		{"vc", ws[1:], "no worker reaches connection vc"},
		{"vc", nil, "no live worker"},
	} {
		if got := Unreached(c.ws, RouteOf(cfg, p, c.conn, vm)); got != c.want {
			t.Errorf("%s with %d workers: %q, want %q", c.conn, len(c.ws), got, c.want)
		}
	}
}

// group: datastore batches, and their reads from the storage snapshot,
// run on a worker that mounts the datastore.
func TestGroupBatchesRunWhereTheDatastoreIsMounted(t *testing.T) {
	e, rr, _ := fleetEnv(t, "vsphere", fake.Options{Seed: 37, VMs: 14, Hosts: 2, Datastores: 3, DiskSize: 128 << 10}, policy.Limits{PerDatastore: 3})
	mounts := map[string]string{"ds-001": "w1", "ds-002": "w1", "ds-003": "w2"}
	if err := e.eng.SetWorkers([]Worker{
		{Name: "w1", Slots: 4, Reach: Reach{Connections: []string{"lab"}, Datastores: []string{"lab/ds-001", "lab/ds-002"}}},
		{Name: "w2", Slots: 4, Reach: Reach{Connections: []string{"lab"}, Datastores: []string{"lab/ds-003"}}},
	}); err != nil {
		t.Fatal(err)
	}
	vms, _ := e.fake.Inventory(context.Background())
	dsOf := map[string]string{}
	for _, vm := range vms {
		dsOf[vm.Name] = vm.Datastores[0]
	}
	p := testPolicy("grouped")
	p.Group = "datastore"
	res := e.run(p)
	if res.Job.Status != catalog.StatusSuccess || len(e.cat.EventsOf(res.Job.ID, "group-snapshot")) == 0 {
		t.Fatalf("job %s (%s)", res.Job.Status, res.Job.Error)
	}
	runs := rr.attempts()
	if len(runs) != len(vms) {
		t.Fatalf("%d reads for %d VMs", len(runs), len(vms))
	}
	for _, r := range runs {
		if want := mounts[dsOf[r.vm]]; r.worker != want {
			t.Errorf("%s on %s read on %q, want %s", r.vm, dsOf[r.vm], r.worker, want)
		}
	}
	e.noLeaks()
}
