package vsphere

import (
	"context"
	"errors"
	"fmt"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
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
		s.vm = mo.VirtualMachine{} // a property now unset (no snapshot left) must not keep its old value
		if err := property.DefaultCollector(s.c.client).RetrieveOne(ctx, moref, sessionProps, &s.vm); err != nil {
			return fmt.Errorf("vsphere: VM %s: %w", s.ref.Name, err)
		}
	}
	return fmt.Errorf("vsphere: %s still has coffer snapshots after %d removals: %w", s.ref.Name, maxDeadOwners, hypervisor.ErrTransient)
}
