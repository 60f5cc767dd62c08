package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/service"
)

// registryOf is a registry holding ws (ListWorkers only).
type registryOf struct {
	catalog.Workers
	ws []catalog.Worker
}

func (r registryOf) ListWorkers(context.Context) ([]catalog.Worker, error) { return r.ws, nil }

// listingRemote answers connection-vms with vms and records on which
// worker, with which input, it was run.
type listingRemote struct {
	vms   []hypervisor.VM
	calls []string
	input []service.ConnectionVMsInput
}

func (r *listingRemote) RunOn(_ context.Context, worker, operation string, in any) (json.RawMessage, error) {
	r.calls = append(r.calls, worker+" "+operation)
	r.input = append(r.input, *in.(*service.ConnectionVMsInput))
	return json.Marshal(service.ConnectionVMs{VMs: r.vms})
}

var standInConfig = &policy.Config{Connections: []policy.Connection{{Name: "kvm1", Kind: "qemu"}, {Name: "vc", Kind: "vsphere"}}}

func standInOf(t *testing.T, remote service.Remote, ws ...catalog.Worker) *WorkerConnector {
	t.Helper()
	r := Remote{Workers: registryOf{ws: ws}}
	c, ok, err := r.StandIn(context.Background(), standInConfig, "kvm1")
	if err != nil || !ok {
		t.Fatalf("kvm1 reached by %+v: stand-in %v, %v", ws, ok, err)
	}
	wc := c.(*WorkerConnector)
	wc.Remote = remote
	return wc
}

// A connection is the workers' while a registered worker that is not
// lost reaches it; otherwise the server opens it as without a fleet.
func TestStandInWhileARegisteredWorkerReachesIt(t *testing.T) {
	reach := catalog.WorkerReach{Connections: []string{"kvm1"}, Hosts: []string{"kvm1/kvm1"}}
	for _, tc := range []struct {
		ws   []catalog.Worker
		want bool
	}{
		{nil, false},
		{[]catalog.Worker{{Name: "kvm1", State: catalog.WorkerLost, Reach: reach}}, false},
		{[]catalog.Worker{{Name: "vc", State: catalog.WorkerReady, Reach: catalog.WorkerReach{Connections: []string{"vc"}}}}, false},
		{[]catalog.Worker{{Name: "kvm1", State: catalog.WorkerStarting, Reach: reach}}, true},
		{[]catalog.Worker{{Name: "kvm1", State: catalog.WorkerDraining, Reach: reach}}, true},
		{[]catalog.Worker{{Name: "kvm1", State: catalog.WorkerReady, Reach: reach}}, true},
	} {
		c, ok, err := Remote{Workers: registryOf{ws: tc.ws}}.StandIn(context.Background(), standInConfig, "kvm1")
		if err != nil || ok != tc.want || (c != nil) != tc.want {
			t.Errorf("workers %+v: stand-in %v (%v), want %v", tc.ws, ok, err, tc.want)
		}
	}
}

// The stand-in refuses what must run on a worker, cleans nothing, and
// names the workers that reach the connection; its group: datastore
// batches run on its workers.
func TestStandInRefusesWhatRunsOnTheWorkers(t *testing.T) {
	ctx := context.Background()
	c := standInOf(t, &listingRemote{}, catalog.Worker{Name: "kvm1", State: catalog.WorkerReady,
		Reach: catalog.WorkerReach{Connections: []string{"kvm1"}, Hosts: []string{"kvm1/kvm1"}}})
	if c.Kind() != "qemu" {
		t.Errorf("kind %q", c.Kind())
	}
	sess, err := c.Snapshot(ctx, hypervisor.VMRef{ID: "u1", Name: "web-1"}, hypervisor.SnapshotRequest{})
	if sess != nil || !errors.Is(err, hypervisor.ErrUnsupported) || errors.Is(err, hypervisor.ErrTransient) ||
		!strings.Contains(err.Error(), "kvm1 (ready)") || !strings.Contains(err.Error(), "web-1") {
		t.Errorf("snapshot on the server: %v, %v", sess, err)
	}
	if theirs, err := c.BatchesOnWorkers(ctx); !theirs || err != nil {
		t.Errorf("the stand-in's batches run on its workers: %v, %v", theirs, err)
	}
	left, err := c.CleanupLeftovers(ctx)
	if left != nil || err != nil {
		t.Errorf("cleanup on the server: %v, %v", left, err)
	}
	vm, err := c.CreateVM(ctx, hypervisor.VMConfig{Name: "web-1"}, hypervisor.NewVMOptions{Name: "web-2"})
	if vm != nil || err == nil || !strings.Contains(err.Error(), "--worker") {
		t.Errorf("restore onto the server's stand-in: %v, %v", vm, err)
	}
	if got := service.Classify(err); got != "invalid" {
		t.Errorf("the refused restore is %q, want invalid", got)
	}
}

// The listing runs on the ready worker renewed last, by ID; a draining
// or lost one is not asked, and without a ready one the listing waits
// (a transient error, which the engine retries).
func TestStandInListsOnAReadyWorker(t *testing.T) {
	ctx := context.Background()
	reach := catalog.WorkerReach{Connections: []string{"kvm1"}, Hosts: []string{"kvm1/kvm1"}}
	now := time.Now()
	vms := []hypervisor.VM{{VMRef: hypervisor.VMRef{ID: "u1", Name: "web-1"}, Host: "kvm1",
		Disks: []hypervisor.DiskInfo{{Key: "vda", Size: 1 << 20}}}}
	remote := &listingRemote{vms: vms}
	c := standInOf(t, remote,
		catalog.Worker{Name: "old", State: catalog.WorkerReady, Reach: reach, HeartbeatAt: now.Add(-time.Second)},
		catalog.Worker{Name: "fresh", State: catalog.WorkerReady, Reach: reach, HeartbeatAt: now},
		catalog.Worker{Name: "leaving", State: catalog.WorkerDraining, Reach: reach, HeartbeatAt: now.Add(time.Second)})
	got, err := c.InventoryNow(ctx)
	if err != nil || len(got) != 1 || got[0].ID != "u1" || got[0].Host != "kvm1" || got[0].ProvisionedBytes() != 1<<20 {
		t.Fatalf("listed %+v, %v", got, err)
	}
	if _, err := c.Inventory(ctx); err != nil {
		t.Fatal(err)
	}
	if strings.Join(remote.calls, "; ") != "fresh connection-vms; fresh connection-vms" ||
		remote.input[0] != (service.ConnectionVMsInput{Connection: "kvm1", Now: true}) || remote.input[1].Now {
		t.Errorf("ran %v with %+v", remote.calls, remote.input)
	}

	c.Workers = registryOf{ws: []catalog.Worker{{Name: "leaving", State: catalog.WorkerDraining, Reach: reach}}}
	if _, err := c.Inventory(ctx); !errors.Is(err, hypervisor.ErrTransient) || !strings.Contains(err.Error(), "leaving (draining)") {
		t.Errorf("without a ready worker: %v", err)
	}
}

// A VM bound to its host (QEMU) listed on a host the reach of no worker
// registered for the connection names fails the listing: the engine could
// place its units nowhere. A lost worker's hosts are the fleet's.
func TestStandInWantsTheHostTheReachNames(t *testing.T) {
	remote := &listingRemote{vms: []hypervisor.VM{{VMRef: hypervisor.VMRef{ID: "u1", Name: "web-1"}, Host: "node7"}}}
	c := standInOf(t, remote, catalog.Worker{Name: "kvm1", State: catalog.WorkerReady,
		Reach: catalog.WorkerReach{Connections: []string{"kvm1"}, Hosts: []string{"kvm1/kvm1"}}})
	_, err := c.Inventory(context.Background())
	if err == nil || !strings.Contains(err.Error(), `host "node7"`) || !strings.Contains(err.Error(), "kvm1/node7") {
		t.Fatalf("a VM on a host the reach does not name: %v", err)
	}

	// node7's worker is lost: its host is still the fleet's, and its VMs'
	// units wait for it (the engine says why), as they would in a run
	// started before the loss.
	c.Workers = registryOf{ws: []catalog.Worker{
		{Name: "kvm1", State: catalog.WorkerReady, Reach: catalog.WorkerReach{Connections: []string{"kvm1"}, Hosts: []string{"kvm1/kvm1"}}},
		{Name: "node7", State: catalog.WorkerLost, Reach: catalog.WorkerReach{Connections: []string{"kvm1"}, Hosts: []string{"kvm1/node7"}}}}}
	if vms, err := c.Inventory(context.Background()); err != nil || len(vms) != 1 {
		t.Fatalf("a VM on a lost worker's host: %v, %v", vms, err)
	}
	if strings.Join(remote.calls, "; ") != "kvm1 connection-vms; kvm1 connection-vms" {
		t.Errorf("listed on %v, want kvm1 (the ready one) each time", remote.calls)
	}
}
