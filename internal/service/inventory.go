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
	last := map[string]catalog.BackupPoint{}
	cat, err := s.openCatalog(ctx)
	switch {
	case err != nil:
		// The inventory is still useful without the last backups.
		s.log.Warn("catalog unavailable: last backups are not shown", "err", err)
	default:
		defer cat.Close()
		points, err := cat.ListBackupPoints(ctx, catalog.BackupPointFilter{})
		if err != nil {
			return nil, err
		}
		for _, p := range points {
			k := p.Connection + "\x00" + p.VMID
			if p.Time.After(last[k].Time) {
				last[k] = p
			}
		}
	}
	inv := &api.Inventory{VMs: []api.VM{}, Errors: []api.ConnectionError{}}
	for _, name := range names {
		vms, err := conns.conns[name].Inventory(ctx)
		if err != nil {
			inv.Errors = append(inv.Errors, api.ConnectionError{Connection: name, Error: err.Error()})
			continue
		}
		for _, vm := range vms {
			d := api.VM{Connection: name, VM: vm.Name, VMID: vm.ID, Host: vm.Host, Datastores: list(vm.Datastores), Tags: tags(vm.Tags),
				PowerState: vm.PowerState, GuestAgent: vm.GuestAgent, ProvisionedBytes: vm.ProvisionedBytes(), Policies: policiesSelecting(cfg, name, vm)}
			if p, ok := last[name+"\x00"+vm.ID]; ok {
				d.LastPointID, d.LastBackup, d.LastMode, d.AgeSeconds = p.ID, p.Time, p.Mode, time.Since(p.Time).Seconds()
			}
			d.Covered = len(d.Policies) > 0 && !d.LastBackup.IsZero()
			inv.VMs = append(inv.VMs, d)
		}
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
