package vsphere

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/snapdesc"
)

// A coffer snapshot is journalled in the state directory of the process
// that took it, so only that process's cleanup finds it after a kill. A
// fleet worker's also names its owner (snapdesc): another worker that
// finds the owner dead removes it instead of refusing the VM's backups.

// maxDeadOwners bounds the dead owners' snapshots one session removes
// (one per VM at most, unless a user stacked snapshots on them).
const maxDeadOwners = 4

// clearDeadOwners refuses the session while the VM has a coffer snapshot,
// unless the request says how to tell a dead owner (OwnerGone) and the
// snapshot's owner is dead: then the snapshot is removed, noted in the
// task's log, and the VM's properties read again without it.
func (s *session) clearDeadOwners(ctx context.Context, moref types.ManagedObjectReference) error {
	for range maxDeadOwners {
		other := cofferSnapshot(s.vm.Snapshot)
		if other == nil {
			return nil
		}
		refuse := fmt.Errorf("vsphere: %s already has coffer snapshot %s (a backup running elsewhere, or a leftover the next cleanup removes): %w",
			s.ref.Name, other.Name, hypervisor.ErrTransient)
		owner := snapdesc.Owner(other.Description)
		if owner == "" || owner == s.req.Owner || s.req.OwnerGone == nil {
			return refuse // not another registration's: its own cleanup's
		}
		gone, err := s.req.OwnerGone(ctx, owner)
		if err != nil {
			return errors.Join(refuse, fmt.Errorf("is %s alive: %w", owner, err))
		}
		if !gone {
			return refuse // a live worker backs the VM up: the retry waits
		}
		vm := object.NewVirtualMachine(s.c.client, moref)
		removed, inFlight, err := s.c.removeNamed(ctx, vm, other.Name, snapdesc.OwnerMark(owner), s.to.SnapshotRemove)
		switch {
		case err != nil:
			return errors.Join(refuse, fmt.Errorf("removing the snapshot of %s, which is dead: %w", owner, err))
		case !removed && inFlight:
			return fmt.Errorf("%w; a snapshot task of %s, which is dead, still runs", refuse, owner)
		case removed:
			s.c.log.Info("vsphere: removed the coffer snapshot of a dead owner", "vm", s.ref.Name, "snapshot", other.Name, "owner", owner)
			s.notes = append(s.notes, fmt.Sprintf("removed coffer snapshot %s left by %s, which is dead", other.Name, owner))
		}
		if snapdesc.Suspended(other.Description) {
			// Before this session reads the VM's power state: the dead
			// owner suspended it, and this session would leave it so.
			resumed, err := s.c.resumeSuspendedSince(ctx, vm, other.CreateTime)
			if err != nil {
				return errors.Join(refuse, fmt.Errorf("powering on %s, which %s suspended: %w", s.ref.Name, owner, err))
			}
			if resumed {
				s.notes = append(s.notes, fmt.Sprintf("powered %s back on: %s, which is dead, suspended it", s.ref.Name, owner))
			}
		}
		s.vm = mo.VirtualMachine{} // a property now unset (no snapshot left) must not keep its old value
		if err := property.DefaultCollector(s.c.client).RetrieveOne(ctx, moref, sessionProps, &s.vm); err != nil {
			return fmt.Errorf("vsphere: VM %s: %w", s.ref.Name, err)
		}
	}
	return fmt.Errorf("vsphere: %s still has coffer snapshots after %d removals: %w", s.ref.Name, maxDeadOwners, hypervisor.ErrTransient)
}

// RemoveOwnersSnapshots removes, on every VM of the connection, the
// coffer snapshots whose description names an owner that gone says is
// dead (a fleet worker declared lost), and powers back on a VM such an
// owner suspended around its snapshot (suspend mode) and left suspended.
// A live worker runs it for the servers when a worker is lost, so that a
// VM no backup touches again does not keep the dead worker's snapshot
// until its next backup. Snapshots without an owner, or of a live one,
// are never touched.
func (c *Connector) RemoveOwnersSnapshots(ctx context.Context, gone func(owner string) bool) ([]hypervisor.Leftover, error) {
	v, err := view.NewManager(c.client).CreateContainerView(ctx, c.client.ServiceContent.RootFolder, []string{"VirtualMachine"}, true)
	if err != nil {
		return nil, fmt.Errorf("vsphere: container view: %w", err)
	}
	defer func() { _ = v.Destroy(context.WithoutCancel(ctx)) }()
	var vms []mo.VirtualMachine
	if err := v.Retrieve(ctx, []string{"VirtualMachine"}, []string{"name", "snapshot"}, &vms); err != nil {
		return nil, fmt.Errorf("vsphere: VMs: %w", err)
	}
	var out []hypervisor.Leftover
	var errs []error
	for _, m := range vms {
		for _, node := range deadOwners(m.Snapshot, gone) {
			left, err := c.removeDeadOwners(ctx, m, node)
			out = append(out, left...)
			if err != nil {
				errs = append(errs, fmt.Errorf("vsphere: %s's snapshot %s: %w", m.Name, node.Name, err))
			}
		}
	}
	return out, errors.Join(errs...)
}

// removeDeadOwners removes snapshot node of VM m, whose owner is dead,
// and resumes the VM if that owner left it suspended.
func (c *Connector) removeDeadOwners(ctx context.Context, m mo.VirtualMachine, node types.VirtualMachineSnapshotTree) ([]hypervisor.Leftover, error) {
	ref := hypervisor.VMRef{ID: m.Self.Value, Name: m.Name}
	owner := snapdesc.Owner(node.Description)
	vm := object.NewVirtualMachine(c.client, m.Self)
	removed, inFlight, err := c.removeNamed(ctx, vm, node.Name, snapdesc.OwnerMark(owner), c.cfg.Timeouts.SnapshotRemove)
	switch {
	case err != nil:
		return nil, err
	case !removed && inFlight:
		return []hypervisor.Leftover{{VM: ref, Kind: "vm-snapshot", Name: node.Name, Action: "a snapshot task of " + owner + " still runs; kept"}}, nil
	}
	var out []hypervisor.Leftover
	if removed {
		c.log.Info("vsphere: removed the coffer snapshot of a dead owner", "vm", m.Name, "snapshot", node.Name, "owner", owner)
		out = append(out, hypervisor.Leftover{VM: ref, Kind: "vm-snapshot", Name: node.Name, Action: "removed (" + owner + " is dead)"})
	}
	if !snapdesc.Suspended(node.Description) {
		return out, nil
	}
	resumed, err := c.resumeSuspendedSince(ctx, vm, node.CreateTime)
	if resumed {
		c.log.Info("vsphere: powered on the VM a dead owner suspended", "vm", m.Name, "owner", owner)
		out = append(out, hypervisor.Leftover{VM: ref, Kind: "suspended-vm", Name: m.Name, Action: "resumed (" + owner + " suspended it)"})
	}
	return out, err
}

// deadOwners are the coffer snapshots of a VM whose owner gone says is
// dead.
func deadOwners(info *types.VirtualMachineSnapshotInfo, gone func(owner string) bool) []types.VirtualMachineSnapshotTree {
	if info == nil {
		return nil
	}
	var out []types.VirtualMachineSnapshotTree
	var walk func([]types.VirtualMachineSnapshotTree)
	walk = func(ts []types.VirtualMachineSnapshotTree) {
		for _, t := range ts {
			if owner := snapdesc.Owner(t.Description); strings.HasPrefix(t.Name, SnapshotPrefix) && strings.HasPrefix(t.Description, snapdesc.Prefix) &&
				owner != "" && gone(owner) {
				out = append(out, t)
			}
			walk(t.ChildSnapshotList)
		}
	}
	walk(info.RootSnapshotList)
	return out
}

// resumeSuspendedSince powers on a VM that is suspended and has not been
// suspended again after created (the owner's snapshot: coffer suspends
// the VM before it takes one); a VM someone suspended later, or powered
// on or off, is left as it is. A vCenter that keeps no suspend time
// (vcsim) is taken at the snapshot's word.
func (c *Connector) resumeSuspendedSince(ctx context.Context, vm *object.VirtualMachine, created time.Time) (bool, error) {
	var m mo.VirtualMachine
	if err := property.DefaultCollector(c.client).RetrieveOne(ctx, vm.Reference(), []string{"runtime"}, &m); err != nil {
		return false, err
	}
	rt := m.Runtime
	if rt.PowerState != types.VirtualMachinePowerStateSuspended || rt.SuspendTime != nil && rt.SuspendTime.After(created) {
		return false, nil
	}
	err := c.runTask(ctx, c.cfg.Timeouts.Setup, func(ctx context.Context) (*object.Task, error) { return vm.PowerOn(ctx) })
	return err == nil, err
}
