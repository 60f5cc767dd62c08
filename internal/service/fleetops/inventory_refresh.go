package fleetops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"context"
	"fmt"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/policy"
)

// The inventory the VM view reads is the catalog's: each connection is
// listed into it in the background by the server that runs the schedules
// (RunSchedules), or when asked (RefreshInventory). Listing a fleet
// live takes a vCenter seconds per thousand VMs; reading a page of the
// catalog takes milliseconds, and says how old it is.

// RefreshInventory lists a connection's VMs now and stores them as its
// inventory, as a task: VMs no longer listed leave the inventory, a VM
// its connection could not describe (busy) keeps its last known state. A
// failed listing leaves the inventory as it was, with the error beside it.
func (s Ops) RefreshInventory(ctx context.Context, in *api.RefreshInventoryInput) (*api.InventoryRefresh, error) {
	cfg, err := s.EngineConfig(ctx)
	if err != nil {
		return nil, err
	}
	if _, ok := cfg.Connection(in.Connection); !ok {
		return nil, api.Errorf(api.NotFound, "no connection named %q in the configuration", in.Connection)
	}
	spec := service.JobSpec{Kind: job.KindInventory, Object: "/connections/" + in.Connection}
	return service.Run(ctx, s.Service, spec, func(ctx context.Context, t service.Job) (*api.InventoryRefresh, error) {
		cat, err := s.OpenCatalog(ctx)
		if err != nil {
			return nil, err
		}
		defer cat.Close()
		return s.refreshConnection(ctx, cfg, cat, in.Connection)
	})
}

// refreshConnection lists one connection and stores what it listed, or
// the failure.
func (s Ops) refreshConnection(ctx context.Context, cfg *policy.Config, cat catalog.Catalog, name string) (*api.InventoryRefresh, error) {
	at := time.Now()
	vms, err := s.listConnection(ctx, cfg, name, true)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err // stopped, not failed: nothing to record
		}
		if rerr := cat.RecordInventoryFailure(context.WithoutCancel(ctx), name, at, err.Error()); rerr != nil {
			s.Logger().Warn("recording a failed inventory", "connection", name, "err", rerr)
		}
		return nil, fmt.Errorf("inventory of %s: %w", name, err)
	}
	records, busy, err := inventoryRecords(ctx, cfg, cat, name, vms)
	if err != nil {
		return nil, err
	}
	if err := cat.ReplaceInventory(ctx, name, at, records); err != nil {
		return nil, err
	}
	return &api.InventoryRefresh{Connection: name, RefreshedAt: at.UTC(), VMs: len(records), Busy: busy}, nil
}

// listConnection asks a connection for its VMs; now: without waiting
// for those a backup holds when the connector can tell them (busy). On a
// fleet's server, a connection its workers reach is listed on one of
// them (OpenConnectors gives the fleet's stand-in).
func (s Ops) listConnection(ctx context.Context, cfg *policy.Config, name string, now bool) ([]hypervisor.VM, error) {
	conns, err := s.OpenConnectors(ctx, cfg, []string{name})
	if err != nil {
		return nil, err
	}
	defer conns.Close()
	c := conns.Conns[name]
	if b, ok := c.(hypervisor.BusyLister); ok && now {
		return b.InventoryNow(ctx)
	}
	return c.Inventory(ctx)
}

// inventoryRecords turns a listing into the connection's inventory rows,
// with the policies that select each VM now. A busy VM the connection
// could name only by its tags (a QEMU monitor's socket) is matched to the
// row of the VM last seen with those tags, which it keeps.
func inventoryRecords(ctx context.Context, cfg *policy.Config, cat catalog.Catalog, conn string, vms []hypervisor.VM) ([]catalog.VMRecord, int, error) {
	var last []catalog.VMRecord
	out := make([]catalog.VMRecord, 0, len(vms))
	busy := 0
	for _, vm := range vms {
		if vm.Busy {
			busy++
		}
		if vm.Busy && vm.ID == "" {
			if last == nil {
				var err error
				if last, err = cat.ListInventory(ctx, catalog.InventoryFilter{Connections: []string{conn}}); err != nil {
					return nil, 0, err
				}
			}
			for _, r := range last {
				if hasTags(r.Tags, vm.Tags) {
					vm.ID = r.ID
					break
				}
			}
			if vm.ID == "" {
				continue // never described: nothing to keep, and no ID to show it by
			}
		}
		pols := policiesSelecting(cfg, conn, vm)
		r := catalog.VMRecord{Connection: conn, ID: vm.ID, Name: vm.Name, Host: vm.Host, Datastores: vm.Datastores,
			Tags: vm.Tags, Bytes: vm.ProvisionedBytes(), PowerState: vm.PowerState, ChangeTracking: vm.ChangeTracking,
			GuestAgent: vm.GuestAgent, Policies: pols, Protected: len(pols) > 0, Busy: vm.Busy}
		for _, d := range vm.Disks {
			r.Disks = append(r.Disks, catalog.DiskRecord{Key: d.Key, Name: d.Name, Size: d.Size, Datastore: d.Datastore, Path: d.Path, Format: d.Format})
		}
		out = append(out, r)
	}
	return out, busy, nil
}

// hasTags reports whether every tag of want is in have.
func hasTags(have, want map[string]string) bool {
	if len(want) == 0 {
		return false
	}
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// refreshInventories keeps every configured connection's inventory at
// most `every` old until ctx ends: each connection whose last refresh
// (by any server) is that old is listed, beside the others, so that one
// slow hypervisor delays no other. A connection that failed is tried
// again after a fifth of `every`, at most a minute.
func (s Ops) refreshInventories(ctx context.Context, every time.Duration) {
	retry := min(every/5, time.Minute)
	look := min(every/10, 10*time.Second) // how often the catalog is read for what is due
	var wg sync.WaitGroup
	defer wg.Wait()
	running := map[string]bool{}
	done := make(chan string)
	for {
		s.startDueRefreshes(ctx, every, retry, running, func(name string, cfg *policy.Config) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := s.refreshInBackground(ctx, cfg, name); err != nil && ctx.Err() == nil {
					s.Logger().Warn("the inventory could not be refreshed: the VM view shows the last one, with this error",
						"connection", name, "err", err)
				}
				select {
				case done <- name:
				case <-ctx.Done():
				}
			}()
		})
		select {
		case <-ctx.Done():
			return
		case name := <-done:
			delete(running, name)
		case <-time.After(look):
		}
	}
}

// startDueRefreshes starts the refresh of every configured connection
// that is due and not running.
func (s Ops) startDueRefreshes(ctx context.Context, every, retry time.Duration, running map[string]bool,
	start func(string, *policy.Config)) {
	cfg, err := s.EngineConfig(ctx)
	if err != nil {
		return // the configuration's own reload logs why
	}
	cat, err := s.OpenCatalog(ctx)
	if err != nil {
		s.Logger().Warn("the inventory's catalog is unavailable", "err", err)
		return
	}
	states, err := cat.InventoryStates(ctx)
	cat.Close()
	if err != nil {
		s.Logger().Warn("reading the inventory's state", "err", err)
		return
	}
	last := map[string]catalog.InventoryState{}
	for _, st := range states {
		last[st.Connection] = st
	}
	now := time.Now()
	for _, c := range cfg.Connections {
		st, seen := last[c.Name]
		wait := every
		if st.Error != "" {
			wait = retry
		}
		if running[c.Name] || (seen && now.Sub(st.AttemptedAt) < wait) {
			continue
		}
		running[c.Name] = true
		start(c.Name, cfg)
	}
}

// refreshInBackground refreshes one connection on a catalog handle of
// its own (the server's is kept open; closing this one leaves it so).
func (s Ops) refreshInBackground(ctx context.Context, cfg *policy.Config, name string) error {
	cat, err := s.OpenCatalog(ctx)
	if err != nil {
		return err
	}
	defer cat.Close()
	_, err = s.refreshConnection(ctx, cfg, cat, name)
	return err
}
