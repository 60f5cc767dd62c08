package catalogtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

func vmKeys(vs []catalog.VMRecord) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Connection + "/" + v.Name + "/" + v.ID
	}
	return out
}

func listInventory(t *testing.T, c catalog.Catalog, f catalog.InventoryFilter) []catalog.VMRecord {
	t.Helper()
	vms, err := c.ListInventory(context.Background(), f)
	ok(t, err)
	return vms
}

func inventoryState(t *testing.T, c catalog.Catalog, conn string) (catalog.InventoryState, bool) {
	t.Helper()
	states, err := c.InventoryStates(context.Background())
	ok(t, err)
	for _, s := range states {
		if s.Connection == conn {
			return s, true
		}
	}
	return catalog.InventoryState{}, false
}

// testInventory: a replace is the connection's whole inventory (VMs not
// listed go, the other connections stay), a busy VM keeps its last known
// state, a failure keeps the rows and says why, and an older replace
// never undoes a newer one.
func testInventory(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	if _, found := inventoryState(t, c, "vc1"); found {
		t.Fatal("a connection never refreshed has a state")
	}
	web := catalog.VMRecord{ID: "vm-10", Name: "web", Host: "esx1", Datastores: []string{"ds1"}, Tags: map[string]string{"tier": "1"},
		Bytes: 40 << 30, PowerState: "running", ChangeTracking: true, GuestAgent: true,
		Disks:    []catalog.DiskRecord{{Key: "2000", Name: "Hard disk 1", Size: 40 << 30, Datastore: "ds1", Path: "[ds1] web/web.vmdk", Format: "vmdk"}},
		Policies: []string{"nightly"}, Protected: true}
	db := catalog.VMRecord{ID: "vm-2", Name: "db", PowerState: "stopped"}
	ok(t, c.ReplaceInventory(ctx, "vc1", at(0), []catalog.VMRecord{web, db}))
	ok(t, c.ReplaceInventory(ctx, "kvm", at(0), []catalog.VMRecord{{ID: "uuid-1", Name: "zeta"}}))
	got := listInventory(t, c, catalog.InventoryFilter{})
	same(t, "inventory", vmKeys(got), []string{"kvm/zeta/uuid-1", "vc1/db/vm-2", "vc1/web/vm-10"})
	want := web
	want.Connection, want.LastSeen = "vc1", at(0)
	same(t, "VM round trip", got[2], want)
	st, _ := inventoryState(t, c, "vc1")
	same(t, "state after a refresh", st, catalog.InventoryState{Connection: "vc1", RefreshedAt: at(0), AttemptedAt: at(0), VMs: 2})

	// db is gone from the fleet, web's monitor is busy, app is new.
	busyWeb := catalog.VMRecord{ID: "vm-10", Name: "web", Busy: true}
	ok(t, c.ReplaceInventory(ctx, "vc1", at(time.Minute), []catalog.VMRecord{busyWeb, {ID: "vm-7", Name: "app"}}))
	got = listInventory(t, c, catalog.InventoryFilter{Connections: []string{"vc1"}})
	same(t, "after the second refresh", vmKeys(got), []string{"vc1/app/vm-7", "vc1/web/vm-10"})
	want.Busy, want.LastSeen = true, at(time.Minute)
	same(t, "a busy VM keeps its last known state", got[1], want)
	same(t, "other connection untouched", vmKeys(listInventory(t, c, catalog.InventoryFilter{Connections: []string{"kvm"}})),
		[]string{"kvm/zeta/uuid-1"})

	ok(t, c.ReplaceInventory(ctx, "vc1", at(2*time.Minute), []catalog.VMRecord{web, {ID: "vm-7", Name: "app"}}))
	got = listInventory(t, c, catalog.InventoryFilter{Connections: []string{"vc1"}})
	if got[1].Busy {
		t.Fatal("a VM described again stays busy")
	}
	// A busy VM without a row yet is inserted as given.
	ok(t, c.ReplaceInventory(ctx, "kvm", at(time.Minute), []catalog.VMRecord{{ID: "uuid-1", Name: "zeta"}, {ID: "uuid-9", Busy: true}}))
	got = listInventory(t, c, catalog.InventoryFilter{Connections: []string{"kvm"}})
	same(t, "a new busy VM", vmKeys(got), []string{"kvm//uuid-9", "kvm/zeta/uuid-1"})

	ok(t, c.RecordInventoryFailure(ctx, "vc1", at(3*time.Minute), "vCenter: connection refused"))
	same(t, "rows after a failure", vmKeys(listInventory(t, c, catalog.InventoryFilter{Connections: []string{"vc1"}})),
		[]string{"vc1/app/vm-7", "vc1/web/vm-10"})
	st, _ = inventoryState(t, c, "vc1")
	same(t, "state after a failure", st, catalog.InventoryState{Connection: "vc1", RefreshedAt: at(2 * time.Minute),
		AttemptedAt: at(3 * time.Minute), Error: "vCenter: connection refused", VMs: 2})
	ok(t, c.RecordInventoryFailure(ctx, "new", at(0), "no route"))
	st, _ = inventoryState(t, c, "new")
	if !st.RefreshedAt.IsZero() || st.Error != "no route" {
		t.Fatalf("a connection that never succeeded: %+v", st)
	}

	// A refresh that started before the last success ends after it.
	ok(t, c.ReplaceInventory(ctx, "vc1", at(time.Minute+time.Second), nil))
	same(t, "an older refresh is ignored", len(listInventory(t, c, catalog.InventoryFilter{Connections: []string{"vc1"}})), 2)
	// A success older than the failure leaves the failure's error.
	ok(t, c.ReplaceInventory(ctx, "vc1", at(150*time.Second), []catalog.VMRecord{web}))
	st, _ = inventoryState(t, c, "vc1")
	same(t, "a success before the failure", st, catalog.InventoryState{Connection: "vc1", RefreshedAt: at(150 * time.Second),
		AttemptedAt: at(3 * time.Minute), Error: "vCenter: connection refused", VMs: 1})
	ok(t, c.ReplaceInventory(ctx, "vc1", at(4*time.Minute), nil))
	same(t, "emptied", len(listInventory(t, c, catalog.InventoryFilter{Connections: []string{"vc1"}})), 0)
	st, _ = inventoryState(t, c, "vc1")
	same(t, "a success after the failure", st, catalog.InventoryState{Connection: "vc1", RefreshedAt: at(4 * time.Minute),
		AttemptedAt: at(4 * time.Minute)})

	if err := c.ReplaceInventory(ctx, "vc1", at(5*time.Minute), []catalog.VMRecord{{Name: "no-id"}}); err == nil {
		t.Fatal("a VM without an ID was accepted")
	}
	if _, err := c.ListInventory(ctx, catalog.InventoryFilter{Protection: "maybe"}); err == nil {
		t.Fatal("an unknown protection filter was accepted")
	}
}

// testInventoryPaging pages through an inventory by keyset, with every
// filter, and compares each listing with the same selection made here.
func testInventoryPaging(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	var all []catalog.VMRecord
	for _, conn := range []string{"a", "b", "c"} {
		var vms []catalog.VMRecord
		for i := range 37 {
			// Names repeat (IDs break the tie), some carry LIKE's
			// wildcards and upper case.
			name := fmt.Sprintf("vm-%02d", i%30)
			switch i % 7 {
			case 1:
				name = fmt.Sprintf("Web_%d", i)
			case 2:
				name = fmt.Sprintf("db%%%d", i)
			}
			v := catalog.VMRecord{ID: fmt.Sprintf("id-%03d", 100-i), Name: name, Protected: i%3 == 0}
			vms = append(vms, v)
			v.Connection, v.LastSeen = conn, at(0)
			all = append(all, v)
		}
		ok(t, c.ReplaceInventory(ctx, conn, at(0), vms))
	}
	slices.SortFunc(all, func(x, y catalog.VMRecord) int {
		return strings.Compare(x.Connection+"\x00"+x.Name+"\x00"+x.ID, y.Connection+"\x00"+y.Name+"\x00"+y.ID)
	})
	filters := []struct {
		f    catalog.InventoryFilter
		keep func(catalog.VMRecord) bool
	}{
		{catalog.InventoryFilter{}, func(catalog.VMRecord) bool { return true }},
		{catalog.InventoryFilter{Connections: []string{"c", "a"}}, func(v catalog.VMRecord) bool { return v.Connection != "b" }},
		{catalog.InventoryFilter{Protection: catalog.Protected}, func(v catalog.VMRecord) bool { return v.Protected }},
		{catalog.InventoryFilter{Protection: catalog.Unprotected}, func(v catalog.VMRecord) bool { return !v.Protected }},
		{catalog.InventoryFilter{NameContains: "WEB_"}, func(v catalog.VMRecord) bool { return strings.HasPrefix(v.Name, "Web_") }},
		{catalog.InventoryFilter{NameContains: "b%"}, func(v catalog.VMRecord) bool { return strings.Contains(v.Name, "b%") }},
		{catalog.InventoryFilter{NameContains: "_1"}, func(v catalog.VMRecord) bool { return strings.Contains(v.Name, "_1") }},
		{catalog.InventoryFilter{Search: "WEB_2"}, func(v catalog.VMRecord) bool { return strings.HasPrefix(v.Name, "Web_2") }},
		{catalog.InventoryFilter{Search: "1 B"}, func(v catalog.VMRecord) bool {
			return v.Connection == "b" && strings.HasSuffix(v.Name, "1")
		}},
		{catalog.InventoryFilter{Connections: []string{"b"}, Protection: catalog.Unprotected, NameContains: "vm-1"},
			func(v catalog.VMRecord) bool {
				return v.Connection == "b" && !v.Protected && strings.Contains(v.Name, "vm-1")
			}},
	}
	for _, fc := range filters {
		var want []catalog.VMRecord
		for _, v := range all {
			if fc.keep(v) {
				want = append(want, v)
			}
		}
		if len(want) == 0 {
			t.Fatalf("filter %+v selects nothing: the test proves nothing", fc.f)
		}
		same(t, fmt.Sprintf("unpaged %+v", fc.f), vmKeys(listInventory(t, c, fc.f)), vmKeys(want))
		for _, size := range []int{1, 7, 100} {
			var got []catalog.VMRecord
			f := fc.f
			f.Limit = size
			for range len(all) + 1 {
				page := listInventory(t, c, f)
				if len(page) > size {
					t.Fatalf("a page of %d holds %d", size, len(page))
				}
				got = append(got, page...)
				if len(page) < size {
					break
				}
				f.After = page[len(page)-1].Cursor()
			}
			same(t, fmt.Sprintf("pages of %d, %+v", size, fc.f), vmKeys(got), vmKeys(want))
		}
	}
}

// testInventoryBriefAndChosen: a brief listing holds, of every VM, what
// policies select by and Protected, and nothing else; a listing of
// chosen VMs holds their whole rows, the same VM ID on two connections
// being two VMs.
func testInventoryBriefAndChosen(t *testing.T, open Opener) {
	c := mustOpen(t, open)
	ctx := context.Background()
	web := catalog.VMRecord{ID: "vm-10", Name: "web", Host: "esx1", Datastores: []string{"ds1", "ds2"}, Tags: map[string]string{"tier": "1"},
		Bytes: 40 << 30, PowerState: "running", ChangeTracking: true, GuestAgent: true,
		Disks:    []catalog.DiskRecord{{Key: "2000", Name: "Hard disk 1", Size: 40 << 30, Datastore: "ds1", Path: "[ds1] web/web.vmdk", Format: "vmdk"}},
		Policies: []string{"nightly"}, Protected: true}
	db := catalog.VMRecord{ID: "vm-2", Name: "db", Host: "esx2", PowerState: "stopped", Disks: []catalog.DiskRecord{{Key: "1", Size: 1}}}
	twin := catalog.VMRecord{ID: "vm-10", Name: "other", Host: "kvm1", PowerState: "running"}
	ok(t, c.ReplaceInventory(ctx, "vc1", at(0), []catalog.VMRecord{web, db}))
	ok(t, c.ReplaceInventory(ctx, "vc2", at(0), []catalog.VMRecord{twin}))
	full := listInventory(t, c, catalog.InventoryFilter{})
	brief := listInventory(t, c, catalog.InventoryFilter{Brief: true})
	same(t, "brief listing", vmKeys(brief), vmKeys(full))
	for i, v := range full {
		want := catalog.VMRecord{Connection: v.Connection, ID: v.ID, Name: v.Name, Host: v.Host, Datastores: v.Datastores, Tags: v.Tags,
			Protected: v.Protected}
		same(t, "brief "+v.Name, brief[i], want)
	}
	same(t, "brief and filtered", vmKeys(listInventory(t, c, catalog.InventoryFilter{Brief: true, Connections: []string{"vc2"}})),
		[]string{"vc2/other/vm-10"})

	chosen := listInventory(t, c, catalog.InventoryFilter{VMs: []catalog.VMRef{{Connection: "vc2", ID: "vm-10"}, {Connection: "vc1", ID: "vm-2"},
		{Connection: "vc1", ID: "gone"}}})
	same(t, "chosen VMs", vmKeys(chosen), []string{"vc1/db/vm-2", "vc2/other/vm-10"})
	same(t, "a chosen VM's whole row", chosen[0], full[0])
	same(t, "chosen on one connection", vmKeys(listInventory(t, c, catalog.InventoryFilter{VMs: []catalog.VMRef{{Connection: "vc1", ID: "vm-10"}}})),
		[]string{"vc1/web/vm-10"})
}
