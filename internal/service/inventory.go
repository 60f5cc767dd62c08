package service

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
)

// VMsInput names the connections to list ("": all).
type VMsInput struct {
	Connections []string
}

// VMs lists every VM the configured connections see, live, with the
// policies that select it and its newest backup point from the catalog:
// the protection view. A connection whose inventory fails is named in the
// result, which then comes back with a partial error.
func (s *Service) VMs(ctx context.Context, in VMsInput) (*api.Inventory, error) {
	cfg, err := s.engineConfig(ctx)
	if err != nil {
		return nil, err
	}
	names := in.Connections
	if len(names) == 0 {
		for _, c := range cfg.Connections {
			names = append(names, c.Name)
		}
	}
	if len(names) == 0 {
		return nil, invalidf("no connections configured (add a connections: section to the configuration file)")
	}
	conns, err := s.openConnectors(ctx, cfg, names)
	if err != nil {
		return nil, err
	}
	inv := &api.Inventory{VMs: []api.VM{}, Errors: []api.ConnectionError{}}
	var refs []catalog.VMRef
	for _, name := range names {
		vms, err := conns.conns[name].Inventory(ctx)
		if err != nil {
			inv.Errors = append(inv.Errors, api.ConnectionError{Connection: name, Error: err.Error()})
			continue
		}
		for _, vm := range vms {
			inv.VMs = append(inv.VMs, api.VM{Connection: name, VM: vm.Name, VMID: vm.ID, Host: vm.Host, Datastores: list(vm.Datastores),
				Tags: tags(vm.Tags), PowerState: vm.PowerState, GuestAgent: vm.GuestAgent, ProvisionedBytes: vm.ProvisionedBytes(),
				Policies: policiesSelecting(cfg, name, vm)})
			refs = append(refs, catalog.VMRef{Connection: name, ID: vm.ID})
		}
	}
	// The newest point of each VM listed: one lookup per VM, not every
	// point of the catalog (100,000s at fleet scale).
	last := map[catalog.VMRef]catalog.BackupPoint{}
	cat, err := s.openCatalog(ctx)
	switch {
	case err != nil:
		// The inventory is still useful without the last backups.
		s.log.Warn("catalog unavailable: last backups are not shown", "err", err)
	case len(refs) > 0:
		defer cat.Close()
		points, err := cat.NewestBackupPoints(ctx, refs)
		if err != nil {
			return nil, err
		}
		for _, p := range points {
			last[catalog.VMRef{Connection: p.Connection, ID: p.VMID}] = p
		}
	default:
		cat.Close()
	}
	for i := range inv.VMs {
		d := &inv.VMs[i]
		if p, ok := last[catalog.VMRef{Connection: d.Connection, ID: d.VMID}]; ok {
			d.LastPointID, d.LastBackup, d.LastMode, d.AgeSeconds = p.ID, p.Time, p.Mode, time.Since(p.Time).Seconds()
		}
		d.Covered = len(d.Policies) > 0 && !d.LastBackup.IsZero()
	}
	sort.SliceStable(inv.VMs, func(i, j int) bool { return inv.VMs[i].Connection < inv.VMs[j].Connection })
	if len(inv.Errors) > 0 {
		var failed []string
		for _, e := range inv.Errors {
			failed = append(failed, e.Connection+": "+e.Error)
		}
		return inv, api.Errorf(api.Partial, "inventory failed: %s", strings.Join(failed, "; "))
	}
	return inv, nil
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
