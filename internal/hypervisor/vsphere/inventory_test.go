package vsphere

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// TestInventoryAtScale lists 1000 VMs on 5 hosts and 100 datastores
// through one container view and property-collector call.
func TestInventoryAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 1000-VM simulator")
	}
	s := startSim(t, simOptions{Hosts: 5, Datastores: 100, VMs: 1000})
	c := s.connect(t, nil)
	ctx := context.Background()
	c.Inventory(ctx) // warm up connections
	// Best of three, so that other test packages running on the same
	// cores do not decide the figure; one listing is one container view
	// and one paged property-collector call, whatever the VM count.
	var vms []hypervisor.VM
	took := time.Hour
	for range 3 {
		start := time.Now()
		var err error
		if vms, err = c.Inventory(ctx); err != nil {
			t.Fatal(err)
		}
		took = min(took, time.Since(start))
	}
	t.Logf("inventory of %d VMs: %s (best of 3)", len(vms), took)
	if len(vms) != 1000 {
		t.Fatalf("%d VMs", len(vms))
	}
	if took > time.Second {
		t.Fatalf("listing 1000 VMs took %s", took)
	}
	perDS, hosts := map[string]int{}, map[string]bool{}
	for _, vm := range vms {
		if len(vm.Disks) != 1 || vm.Disks[0].Size != s.opts.DiskSize || vm.PowerState != "running" || vm.Host == "" {
			t.Fatalf("vm %+v", vm)
		}
		if len(vm.Datastores) != 1 || !strings.HasPrefix(vm.Disks[0].Path, "["+vm.Datastores[0]+"] "+vm.Name+"/") {
			t.Fatalf("datastores %v disk %+v", vm.Datastores, vm.Disks[0])
		}
		perDS[vm.Datastores[0]]++
		hosts[vm.Host] = true
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
