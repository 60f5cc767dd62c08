package engine

import (
	"slices"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/fake"
	"github.com/coffer-backup/coffer/internal/policy"
)

// A policy's workers restrict its units to them: vSphere units any of
// three workers reaches run only on the two the policy names, spread over
// both.
func TestPolicyWorkersRestrictItsUnits(t *testing.T) {
	e, rr, _ := fleetEnv(t, "vsphere", fake.Options{Seed: 41, VMs: 18, Hosts: 2, Datastores: 2, DiskSize: 64 << 10}, policy.Limits{})
	var ws []Worker
	for _, name := range []string{"w1", "w2", "w3"} {
		ws = append(ws, Worker{Name: name, Slots: 2, Reach: Reach{Connections: []string{"lab"}}})
	}
	if err := e.eng.SetWorkers(ws); err != nil {
		t.Fatal(err)
	}
	p := testPolicy("pinned")
	p.Workers = []string{"w1", "w3"}
	res := e.run(p)
	if res.Job.Status != catalog.StatusSuccess || len(res.Tasks) != 18 {
		t.Fatalf("job %s (%s), %d tasks", res.Job.Status, res.Job.Error, len(res.Tasks))
	}
	per := map[string]int{}
	for _, r := range rr.attempts() {
		per[r.worker]++
	}
	if per["w2"] != 0 || per["w1"] == 0 || per["w3"] == 0 {
		t.Fatalf("attempts per worker %v: want them on w1 and w3 only, on both", per)
	}
	t.Logf("attempts per worker: %v", per)
	e.noLeaks()
}

// A unit whose policy's workers cannot run it says so, naming them.
func TestUnreachedNamesThePolicysWorkers(t *testing.T) {
	cfg := &policy.Config{Connections: []policy.Connection{{Name: "kvm", Kind: "libvirt"}, {Name: "vc", Kind: "vsphere"}}}
	vm := hypervisor.VM{VMRef: hypervisor.VMRef{Name: "db1"}, Host: "kvm7"}
	ws := []Worker{
		{Name: "a", Slots: 1, Reach: Reach{Connections: []string{"kvm", "vc"}, Hosts: []string{"kvm/kvm1"}}},
		{Name: "b", Slots: 1, Reach: Reach{Connections: []string{"kvm"}, Hosts: []string{"kvm/kvm7"}}},
	}
	for _, c := range []struct {
		conn    string
		workers []string
		want    string
	}{
		{"kvm", []string{"b"}, ""},
		{"kvm", []string{"a"}, "no live worker of the policy's workers (a) reaches host kvm7"},
		{"vc", []string{"a", "b"}, ""},
		{"vc", []string{"b"}, "no live worker of the policy's workers (b) reaches connection vc"},
		{"vc", []string{"c", "d"}, "no live worker of the policy's workers (c, d)"},
	} {
		rt := RouteOf(cfg, policy.Policy{Name: "p", Workers: c.workers}, c.conn, vm)
		if got := Unreached(ws, rt); got != c.want {
			t.Errorf("%s on %v: %q, want %q", c.conn, c.workers, got, c.want)
		}
		for _, w := range ws {
			if want := c.want == "" && w.Reach.Covers(rt) && (len(c.workers) == 0 || slices.Contains(c.workers, w.Name)); w.Covers(rt) != want {
				t.Errorf("%s on %v: worker %s covers it: %v", c.conn, c.workers, w.Name, !want)
			}
		}
	}
}
