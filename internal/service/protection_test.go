package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/fleetops"
	"github.com/coffer-backup/coffer/internal/service/servicetest"
)

// protectionFleet is a hand-built fleet on one connection: web-* VMs a
// policy without an rpo selects (held to the default day), db-* VMs one
// with a 2h rpo selects, and a VM none selects. Each VM's name says how
// it stands.
const protectionFleet = `connections:
  - name: kvm
    kind: qemu
    options: {sockets: ["/nonexistent/qmp.sock"]}
policies:
  - name: nightly
    connection: kvm
    select: {names: ["web-*"]}
  - name: hourly
    connection: kvm
    rpo: 2h
    select: {names: ["db-*"]}
`

// fillProtectionFleet writes the fleet's inventory and points straight
// into the catalog, each point its age before now.
func fillProtectionFleet(t *testing.T, cat catalog.Catalog, now time.Time) {
	t.Helper()
	ctx := context.Background()
	ages := map[string]time.Duration{
		"web-within": time.Hour, "web-outside": 30 * time.Hour, "web-nopoint": 0,
		"db-within": time.Hour, "db-outside": 3 * time.Hour, // within the default day, outside its policy's 2h
		"lone-nopolicy": time.Hour,
	}
	var vms []catalog.VMRecord
	var points []catalog.BackupPoint
	for name, age := range ages {
		vms = append(vms, catalog.VMRecord{ID: "id-" + name, Name: name, PowerState: "running",
			Disks: []catalog.DiskRecord{{Key: "0", Name: name + ".qcow2", Size: 1 << 30}}})
		if age > 0 {
			points = append(points, catalog.BackupPoint{Repository: "r", ID: "p-" + name, Time: now.Add(-age), Connection: "kvm",
				VMID: "id-" + name, VMName: name, Mode: "full"})
			// An older point too: the newest is what counts.
			points = append(points, catalog.BackupPoint{Repository: "r", ID: "old-" + name, Time: now.Add(-age - 48*time.Hour),
				Connection: "kvm", VMID: "id-" + name, VMName: name, Mode: "full"})
		}
	}
	if err := cat.ReplaceInventory(ctx, "kvm", now, vms); err != nil {
		t.Fatal(err)
	}
	if err := cat.PutBackupPoints(ctx, points); err != nil {
		t.Fatal(err)
	}
}

// TestProtectionSummary counts a hand-built fleet by how each VM stands
// against its RPO (the strictest of its policies', a day when none sets
// one), and lists it with the VMs that need a look first, a page at a
// time.
func TestProtectionSummary(t *testing.T) {
	e := newConfEnv(t, protectionFleet)
	s := e.service()
	fillProtectionFleet(t, e.openCatalog(), time.Now())

	sum, err := servicetest.Protection(e.ctx, s, api.ProtectionSummaryInput{})
	if err != nil {
		t.Fatal(err)
	}
	same(t, "counts", []int{sum.Total, sum.WithinRPO, sum.OutsideRPO, sum.NoPoint, sum.NoPolicy}, []int{6, 2, 2, 1, 1})
	same(t, "rpos", []float64{sum.DefaultRPOSeconds, float64(sum.PoliciesWithRPO)}, []float64{86400, 1})
	same(t, "attention, by name", vmOrder(sum.Attention), []string{"db-outside", "lone-nopolicy", "web-nopoint", "web-outside"})
	same(t, "judgement", protectionOfVMs(sum.Attention), []string{api.ProtectionOutsideRPO, api.ProtectionNoPolicy,
		api.ProtectionNoPoint, api.ProtectionOutsideRPO})
	if a := sum.Attention[0]; a.RPOSeconds != 7200 || a.LastPointID != "p-db-outside" {
		t.Errorf("db-outside: rpo %vs, newest point %q; want 7200s and p-db-outside", a.RPOSeconds, a.LastPointID)
	}
	// The fleet is judged from brief rows; the VMs shown carry their
	// whole ones.
	wholeRows(t, sum.Attention)

	// The attention order, paged: no policy, no point, outside, within.
	for _, c := range []struct {
		in      api.ListVMsInput
		want    []string
		matched int
	}{
		{api.ListVMsInput{Order: fleetops.OrderAttention},
			[]string{"lone-nopolicy", "web-nopoint", "db-outside", "web-outside", "db-within", "web-within"}, 6},
		{api.ListVMsInput{Order: fleetops.OrderAttention, Attention: true},
			[]string{"lone-nopolicy", "web-nopoint", "db-outside", "web-outside"}, 4},
		{api.ListVMsInput{Order: fleetops.OrderAttention, Search: "WEB"}, []string{"web-nopoint", "web-outside", "web-within"}, 3},
		{api.ListVMsInput{Attention: true, Search: "kvm"}, []string{"db-outside", "lone-nopolicy", "web-nopoint", "web-outside"}, 4},
	} {
		var got []string
		in := c.in
		in.Limit = 2
		for range 10 {
			inv, err := servicetest.ListVMs(e.ctx, s, in)
			if err != nil {
				t.Fatal(err)
			}
			if inv.Counts == nil || *inv.Counts != (api.InventoryCounts{Total: 6, Matched: c.matched}) {
				t.Fatalf("%+v: counts %+v, want 6 and %d", c.in, inv.Counts, c.matched)
			}
			got = append(got, vmOrder(inv.VMs)...)
			wholeRows(t, inv.VMs)
			if inv.Next == "" {
				break
			}
			in.After = inv.Next
		}
		same(t, "pages of "+c.in.Order+" "+c.in.Search, got, c.want)
	}
	// A cursor of one order is refused by the other.
	inv, err := servicetest.ListVMs(e.ctx, s, api.ListVMsInput{Order: fleetops.OrderAttention, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := servicetest.ListVMs(e.ctx, s, api.ListVMsInput{After: inv.Next, Limit: 1}); service.Classify(err) != api.Invalid {
		t.Errorf("an attention cursor in the name order: %v", err)
	}
}

// TestProtectionSummaryOnPostgres runs it on a PostgreSQL catalog.
func TestProtectionSummaryOnPostgres(t *testing.T) {
	onPostgres(t, map[string]func(*testing.T){"Summary": TestProtectionSummary})
}

func vmOrder(vms []api.VM) []string {
	out := []string{}
	for _, v := range vms {
		out = append(out, v.VM)
	}
	return out
}

func protectionOfVMs(vms []api.VM) []string {
	out := []string{}
	for _, v := range vms {
		out = append(out, v.Protection)
	}
	return out
}

// wholeRows fails unless every VM document carries what only its whole
// inventory row holds (the disks and power state fillProtectionFleet
// gives every VM).
func wholeRows(t *testing.T, vms []api.VM) {
	t.Helper()
	for _, v := range vms {
		if len(v.Disks) != 1 || v.Disks[0].Name != v.VM+".qcow2" || v.PowerState != "running" {
			t.Errorf("%s is shown without its whole inventory row: disks %+v, power state %q", v.VM, v.Disks, v.PowerState)
		}
	}
}
