package fleetops

import (
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/apidoc"

	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
)

// vmsQuery is a listing of the inventory: its input with the page's size
// set (Limit), and whether the caller may see a VM (sees, nil: every VM;
// a listing that judges every VM, by Order or Attention, applies it
// before paging).
type vmsQuery struct {
	api.ListVMsInput
	sees func(connection, vm string) bool
}

// OrderAttention lists the VMs that need a look first (ListVMsInput.Order).
const OrderAttention = "attention"

// VMs lists a page of the VMs of the configured connections from the
// catalog's inventory (inventory_refresh.go keeps it), with the policies
// of the configuration in effect that select each and its newest backup
// point: the protection view. It never answers an empty list in silence:
// a connection never listed is listed now, and one whose last refresh
// failed is named in the result (its VMs are those of its last success),
// which then comes back with a partial error.
// The page holds the VMs the caller holds Conn.Audit on and the state of
// the connections it sees something of. VMs the caller may not see are
// left out of the page, which may then be short while more follow: its
// Next (the document's too) says whether they do.
func (s Ops) VMs(ctx context.Context, in *api.ListVMsInput) (*VMsPage, error) {
	q := vmsQuery{ListVMsInput: *in, sees: sees(ctx, s)}
	q.Limit = cmp.Or(in.Limit, vmsPageSize)
	inv, next, err := s.vmsPage(ctx, q)
	if inv == nil {
		return nil, err
	}
	inv.Next = next
	inv.VMs = service.Visible(ctx, s.Service, auth.ConnAudit, inv.VMs, func(v api.VM) []string { return []string{auth.VMPath(v.Connection, v.VM)} })
	inv.Connections, inv.Errors, err = seenConnections(ctx, s, inv.Connections, inv.Errors, err)
	return &VMsPage{Body: inv, Next: next}, err
}

// RefreshInventories lists the connections asked for (every configured
// one when none is) live and stores what each listed, a failure beside
// its last success. The command line without a server calls it before it
// reads the inventory (coffer vms, vms protection): nobody refreshes that
// inventory in the background there. The server's operations read the
// inventory its schedules keep, so their inputs have no such option.
func (s Ops) RefreshInventories(ctx context.Context, connections []string) error {
	cfg, names, err := s.inventoryConnections(ctx, connections)
	if err != nil {
		return err
	}
	cat, err := s.OpenCatalog(ctx)
	if err != nil {
		return fmt.Errorf("the inventory is kept in the catalog: %w", err)
	}
	defer cat.Close()
	_, err = s.inventoryStates(ctx, cfg, cat, names, true)
	return err
}

// inventoryConnections is the configuration in effect and the
// connections asked for (every configured one when none is), each
// checked.
func (s Ops) inventoryConnections(ctx context.Context, asked []string) (*policy.Config, []string, error) {
	cfg, err := s.EngineConfig(ctx)
	if err != nil {
		return nil, nil, err
	}
	names := asked
	if len(names) == 0 {
		for _, c := range cfg.Connections {
			names = append(names, c.Name)
		}
	}
	if len(names) == 0 {
		return nil, nil, service.Invalidf("no connections configured (add a connections: section to the configuration file)")
	}
	for _, n := range names {
		if _, ok := cfg.Connection(n); !ok {
			return nil, nil, service.Invalidf("no connection named %q in the configuration", n)
		}
	}
	return cfg, names, nil
}

// vmsPage is VMs with the cursor of the next page ("" at the end).
func (s Ops) vmsPage(ctx context.Context, in vmsQuery) (*api.Inventory, string, error) {
	cfg, names, err := s.inventoryConnections(ctx, in.Connections)
	if err != nil {
		return nil, "", err
	}
	if in.Protection != "" && in.Protection != catalog.Protected && in.Protection != catalog.Unprotected {
		return nil, "", service.Invalidf("protection %q: protected, unprotected or nothing", in.Protection)
	}
	if in.Order != "" && in.Order != OrderAttention {
		return nil, "", service.Invalidf("order %q: attention or nothing (by connection and name)", in.Order)
	}
	after, afterRank, err := decodeVMCursor(in.After, in.Order == OrderAttention)
	if err != nil {
		return nil, "", err
	}
	cat, err := s.OpenCatalog(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("the inventory is kept in the catalog: %w", err)
	}
	defer cat.Close()
	states, err := s.inventoryStates(ctx, cfg, cat, names, false)
	if err != nil {
		return nil, "", err
	}
	now := time.Now()
	inv := inventoryHead(names, states, now)
	var page []judgedVM
	if in.Order != "" || in.Attention {
		if page, inv.Counts, err = attentionPage(ctx, cfg, cat, names, in, after, afterRank, now); err != nil {
			return nil, "", err
		}
	} else {
		rows, err := cat.ListInventory(ctx, catalog.InventoryFilter{Connections: names, Protection: in.Protection,
			NameContains: in.Name, Search: in.Search, After: after, Limit: in.Limit})
		if err != nil {
			return nil, "", err
		}
		for _, r := range rows {
			page = append(page, judgedVM{rec: r, policies: policiesSelecting(cfg, r.Connection, hypervisorVM(r))})
		}
	}
	if inv.VMs, err = vmDocs(ctx, cfg, cat, page, now); err != nil {
		return nil, "", err
	}
	next := ""
	if in.Limit > 0 && len(page) == in.Limit {
		last := page[len(page)-1]
		next = encodeVMCursor(last.rec.Cursor(), in.Order == OrderAttention, last.rank)
	}
	return inv, next, inventoryError(inv)
}

// inventoryHead is an inventory document without its VMs: how old each
// connection's inventory is, and the connections whose inventory is
// missing or whose last refresh failed.
func inventoryHead(names []string, states map[string]catalog.InventoryState, now time.Time) *api.Inventory {
	inv := &api.Inventory{VMs: []api.VM{}, Connections: []api.InventoryState{}, Errors: []api.ConnectionError{}}
	for _, n := range names {
		st, ok := states[n]
		doc := api.InventoryState{Connection: n, RefreshedAt: st.RefreshedAt, AttemptedAt: st.AttemptedAt, Error: st.Error, VMs: st.VMs}
		if !st.RefreshedAt.IsZero() {
			doc.AgeSeconds = now.Sub(st.RefreshedAt).Seconds()
		}
		inv.Connections = append(inv.Connections, doc)
		switch {
		case !ok:
			inv.Errors = append(inv.Errors, api.ConnectionError{Connection: n, Error: "not listed yet"})
		case st.Error != "" && st.RefreshedAt.IsZero():
			inv.Errors = append(inv.Errors, api.ConnectionError{Connection: n, Error: st.Error + " (never listed)"})
		case st.Error != "":
			inv.Errors = append(inv.Errors, api.ConnectionError{Connection: n, Error: fmt.Sprintf("%s (the VMs shown are those listed at %s)",
				st.Error, st.RefreshedAt.Format(time.RFC3339))})
		}
	}
	return inv
}

// inventoryError is the partial error of an inventory whose connections
// failed, nil when none did.
func inventoryError(inv *api.Inventory) error {
	if len(inv.Errors) == 0 {
		return nil
	}
	var failed []string
	for _, e := range inv.Errors {
		failed = append(failed, e.Connection+": "+e.Error)
	}
	return api.Errorf(api.Partial, "inventory failed: %s", strings.Join(failed, "; "))
}

// inventoryStates returns the refresh state of each named connection,
// listing first those never listed (or all, when refresh says).
func (s Ops) inventoryStates(ctx context.Context, cfg *policy.Config, cat catalog.Catalog, names []string, refresh bool) (map[string]catalog.InventoryState, error) {
	read := func() (map[string]catalog.InventoryState, error) {
		states, err := cat.InventoryStates(ctx)
		if err != nil {
			return nil, err
		}
		out := map[string]catalog.InventoryState{}
		for _, st := range states {
			out[st.Connection] = st
		}
		return out, nil
	}
	states, err := read()
	if err != nil {
		return nil, err
	}
	listed := false
	for _, n := range names {
		if _, ok := states[n]; ok && !refresh {
			continue
		}
		listed = true
		// A failure is recorded in the catalog and shown from there.
		if _, err := s.refreshConnection(ctx, cfg, cat, n); err != nil && ctx.Err() != nil {
			return nil, err
		}
	}
	if !listed {
		return states, nil
	}
	return read()
}

// hypervisorVM is an inventory row as the policies' selectors see it.
func hypervisorVM(r catalog.VMRecord) hypervisor.VM {
	vm := hypervisor.VM{VMRef: hypervisor.VMRef{ID: r.ID, Name: r.Name}, Host: r.Host, Datastores: r.Datastores, Tags: r.Tags,
		PowerState: r.PowerState, GuestAgent: r.GuestAgent, ChangeTracking: r.ChangeTracking}
	for _, d := range r.Disks {
		vm.Disks = append(vm.Disks, hypervisor.DiskInfo{Key: d.Key, Name: d.Name, Size: d.Size, Datastore: d.Datastore, Path: d.Path, Format: d.Format})
	}
	return vm
}

// vmDoc is a VM of the inventory as the API shows it, with the policies
// of the configuration in effect that select it.
func vmDoc(r catalog.VMRecord, policies []string) api.VM {
	disks := make([]api.Disk, len(r.Disks))
	for i, d := range r.Disks {
		disks[i] = api.Disk{Key: d.Key, Name: d.Name, SizeBytes: d.Size, Datastore: d.Datastore, Path: d.Path, Format: d.Format}
	}
	return api.VM{Connection: r.Connection, VM: r.Name, VMID: r.ID, Host: r.Host, Datastores: apidoc.NonNil(r.Datastores), Tags: apidoc.NonNilTags(r.Tags),
		PowerState: r.PowerState, GuestAgent: r.GuestAgent, ChangeTracking: r.ChangeTracking, ProvisionedBytes: r.Bytes,
		Disks: disks, Busy: r.Busy, Policies: policies}
}

// policiesSelecting names the policies that back up vm of a connection.
func policiesSelecting(cfg *policy.Config, conn string, vm hypervisor.VM) []string {
	out := []string{}
	for _, p := range cfg.Policies {
		for _, c := range p.ConnectionNames() {
			if c == conn && p.Selects(vm) {
				out = append(out, p.Name)
				break
			}
		}
	}
	return out
}

// A cursor of the inventory is its VMCursor as JSON, base64url: opaque to
// the caller, and safe in a query string whatever the names hold. A
// cursor of the attention order carries the VM's rank too.
func encodeVMCursor(c catalog.VMCursor, attention bool, rank int) string {
	parts := []string{c.Connection, c.Name, c.ID}
	if attention {
		parts = append(parts, strconv.Itoa(rank))
	}
	b, _ := json.Marshal(parts)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeVMCursor(s string, attention bool) (catalog.VMCursor, int, error) {
	if s == "" {
		return catalog.VMCursor{}, 0, nil
	}
	var parts []string
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &parts)
	}
	want := 3
	if attention {
		want = 4
	}
	if err != nil || len(parts) != want || parts[2] == "" {
		return catalog.VMCursor{}, 0, service.Invalidf("after %q: not a cursor of this VM listing (pass the Coffer-Next header of the previous page, "+
			"with the same order)", s)
	}
	rank := 0
	if attention {
		if rank, err = strconv.Atoi(parts[3]); err != nil {
			return catalog.VMCursor{}, 0, service.Invalidf("after %q: not a cursor of the attention order (pass the Coffer-Next header of the previous page)", s)
		}
	}
	return catalog.VMCursor{Connection: parts[0], Name: parts[1], ID: parts[2]}, rank, nil
}
