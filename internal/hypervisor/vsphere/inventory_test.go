package vsphere

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vmware/govmomi/vim25/soap"
)

// countingCalls counts the API calls made through a client.
type countingCalls struct {
	soap.RoundTripper
	n atomic.Int32
}

func (c *countingCalls) RoundTrip(ctx context.Context, req, res soap.HasFault) error {
	c.n.Add(1)
	return c.RoundTripper.RoundTrip(ctx, req, res)
}

// TestInventoryAtScale lists 1000 VMs on 5 hosts and 100 datastores and
// checks every one, and that the listing costs three API calls whatever the
// VM count (create the container view, one RetrievePropertiesEx that vcsim
// answers in one page, destroy the view): no call per VM, host or
// datastore. How long it takes is measured by bench/vsphere (see
// docs/benchmarks-vsphere.md, Inventory), not asserted here.
func TestInventoryAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 1000-VM simulator")
	}
	s := startSim(t, simOptions{Hosts: 5, Datastores: 100, VMs: 1000})
	c := s.connect(t, nil)
	calls := &countingCalls{RoundTripper: c.client.RoundTripper}
	c.client.RoundTripper = calls
	vms, err := c.Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := calls.n.Load(); n != 3 {
		t.Errorf("listing 1000 VMs made %d API calls, want 3 (view, retrieval, view removal)", n)
	}
	if len(vms) != 1000 {
		t.Fatalf("%d VMs", len(vms))
	}
	perDS, hosts, names := map[string]int{}, map[string]bool{}, map[string]bool{}
	for _, vm := range vms {
		if len(vm.Disks) != 1 || vm.Disks[0].Size != s.opts.DiskSize || vm.PowerState != "running" || vm.Host == "" {
			t.Fatalf("vm %+v", vm)
		}
		if len(vm.Datastores) != 1 || !strings.HasPrefix(vm.Disks[0].Path, "["+vm.Datastores[0]+"] "+vm.Name+"/") {
			t.Fatalf("datastores %v disk %+v", vm.Datastores, vm.Disks[0])
		}
		perDS[vm.Datastores[0]]++
		hosts[vm.Host] = true
		names[vm.Name] = true
	}
	if len(names) != 1000 {
		t.Fatalf("%d distinct names among 1000 VMs", len(names))
	}
	if len(perDS) != 100 || len(hosts) != 5 {
		t.Fatalf("%d datastores, %d hosts", len(perDS), len(hosts))
	}
	for ds, n := range perDS {
		if n != 10 {
			t.Fatalf("datastore %s holds %d VMs", ds, n)
		}
	}
}
