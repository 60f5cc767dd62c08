package service

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
)

// VMsInput selects VMs of the inventory.
type VMsInput struct {
	Connections []string // "": every configured connection
	// Protection is "protected" (a policy selects the VM), "unprotected"
	// or "" (both).
	Protection string
	// Name keeps VMs whose name contains it, ignoring ASCII case.
	Name string
	// After is the cursor a page returned as its next; Limit the page's
	// size (0: every VM).
	After string
	Limit int
	// Refresh lists the connections live first: the command line without
	// a server, whose inventory nobody refreshes in the background.
	Refresh bool
}

// VMs lists the VMs of the configured connections from the catalog's
// inventory (inventory_refresh.go keeps it), with the policies of the
// configuration in effect that select each and its newest backup point:
// the protection view. It never answers an empty list in silence: a
// connection never listed is listed now, and one whose last refresh
// failed is named in the result (its VMs are those of its last success),
// which then comes back with a partial error.
// The document's Next is the cursor of the page after it.
func (s *Service) VMs(ctx context.Context, in VMsInput) (*api.Inventory, error) {
	inv, next, err := s.vmsPage(ctx, in)
	if inv != nil {
		inv.Next = next
	}
	return inv, err
}

// vmsPage is VMs with the cursor of the next page ("" at the end).
func (s *Service) vmsPage(ctx context.Context, in VMsInput) (*api.Inventory, string, error) {
	cfg, err := s.engineConfig(ctx)
	if err != nil {
		return nil, "", err
	}
	names := in.Connections
	if len(names) == 0 {
		for _, c := range cfg.Connections {
			names = append(names, c.Name)
		}
	}
	if len(names) == 0 {
		return nil, "", invalidf("no connections configured (add a connections: section to the configuration file)")
	}
	for _, n := range names {
		if _, ok := connection(cfg, n); !ok {
			return nil, "", invalidf("no connection named %q in the configuration", n)
		}
	}
	if in.Protection != "" && in.Protection != catalog.Protected && in.Protection != catalog.Unprotected {
		return nil, "", invalidf("protection %q: protected, unprotected or nothing", in.Protection)
	}
	after, err := decodeVMCursor(in.After)
	if err != nil {
		return nil, "", err
	}
	cat, err := s.openCatalog(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("the inventory is kept in the catalog: %w", err)
	}
	defer cat.Close()
	states, err := s.inventoryStates(ctx, cfg, cat, names, in.Refresh)
	if err != nil {
		return nil, "", err
	}
	rows, err := cat.ListInventory(ctx, catalog.InventoryFilter{Connections: names, Protection: in.Protection,
		NameContains: in.Name, After: after, Limit: in.Limit})
	if err != nil {
		return nil, "", err
	}
	inv := &api.Inventory{VMs: make([]api.VM, 0, len(rows)), Connections: []api.InventoryState{}, Errors: []api.ConnectionError{}}
	now := time.Now()
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
	// The newest point of each VM of the page: one grouped lookup on
	// points_vm for the page, whatever the size of the fleet.
	refs := make([]catalog.VMRef, len(rows))
	for i, r := range rows {
		refs[i] = catalog.VMRef{Connection: r.Connection, ID: r.ID}
	}
	last := map[catalog.VMRef]catalog.BackupPoint{}
	if len(refs) > 0 {
		points, err := cat.NewestBackupPoints(ctx, refs)
		if err != nil {
			return nil, "", err
		}
		for _, p := range points {
			last[catalog.VMRef{Connection: p.Connection, ID: p.VMID}] = p
		}
	}
	for _, r := range rows {
		d := vmDoc(cfg, r)
		if p, ok := last[catalog.VMRef{Connection: r.Connection, ID: r.ID}]; ok {
			d.LastPointID, d.LastBackup, d.LastMode, d.AgeSeconds = p.ID, p.Time, p.Mode, now.Sub(p.Time).Seconds()
		}
		d.Covered = len(d.Policies) > 0 && !d.LastBackup.IsZero()
		inv.VMs = append(inv.VMs, d)
	}
	next := ""
	if in.Limit > 0 && len(rows) == in.Limit {
		next = encodeVMCursor(rows[len(rows)-1].Cursor())
	}
	if len(inv.Errors) > 0 {
		var failed []string
		for _, e := range inv.Errors {
			failed = append(failed, e.Connection+": "+e.Error)
		}
		return inv, next, api.Errorf(api.Partial, "inventory failed: %s", strings.Join(failed, "; "))
	}
	return inv, next, nil
}

// inventoryStates returns the refresh state of each named connection,
// listing first those never listed (or all, when refresh says).
func (s *Service) inventoryStates(ctx context.Context, cfg *policy.Config, cat catalog.Catalog, names []string, refresh bool) (map[string]catalog.InventoryState, error) {
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

// vmDoc is a VM of the inventory as the API shows it, with the policies
// of the configuration in effect that select it.
func vmDoc(cfg *policy.Config, r catalog.VMRecord) api.VM {
	vm := hypervisor.VM{VMRef: hypervisor.VMRef{ID: r.ID, Name: r.Name}, Host: r.Host, Datastores: r.Datastores, Tags: r.Tags,
		PowerState: r.PowerState, GuestAgent: r.GuestAgent, ChangeTracking: r.ChangeTracking}
	disks := make([]api.Disk, len(r.Disks))
	for i, d := range r.Disks {
		disks[i] = api.Disk{Key: d.Key, Name: d.Name, SizeBytes: d.Size, Datastore: d.Datastore, Path: d.Path, Format: d.Format}
		vm.Disks = append(vm.Disks, hypervisor.DiskInfo{Key: d.Key, Name: d.Name, Size: d.Size, Datastore: d.Datastore, Path: d.Path, Format: d.Format})
	}
	return api.VM{Connection: r.Connection, VM: r.Name, VMID: r.ID, Host: r.Host, Datastores: list(r.Datastores), Tags: tags(r.Tags),
		PowerState: r.PowerState, GuestAgent: r.GuestAgent, ChangeTracking: r.ChangeTracking, ProvisionedBytes: r.Bytes,
		Disks: disks, Busy: r.Busy, Policies: policiesSelecting(cfg, r.Connection, vm)}
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
// the caller, and safe in a query string whatever the names hold.
func encodeVMCursor(c catalog.VMCursor) string {
	b, _ := json.Marshal([]string{c.Connection, c.Name, c.ID})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeVMCursor(s string) (catalog.VMCursor, error) {
	if s == "" {
		return catalog.VMCursor{}, nil
	}
	var parts []string
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &parts)
	}
	if err != nil || len(parts) != 3 || parts[2] == "" {
		return catalog.VMCursor{}, invalidf("after %q: not a cursor of the VM listing (pass the Coffer-Next header of the previous page)", s)
	}
	return catalog.VMCursor{Connection: parts[0], Name: parts[1], ID: parts[2]}, nil
}
