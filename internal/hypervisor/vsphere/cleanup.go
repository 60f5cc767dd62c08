package vsphere

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/vsinstant"
	"github.com/coffer-backup/coffer/internal/statefile"
)

// CleanupLeftovers implements hypervisor.Connector. It only acts on
// journals of processes that are gone, and only on the snapshot a journal
// names (which starts with SnapshotPrefix): snapshots users or other tools
// made, and other coffer processes' live sessions, are never touched.
func (c *Connector) CleanupLeftovers(ctx context.Context) ([]hypervisor.Leftover, error) {
	// Disks a killed coffer hot-added go first: a snapshot whose base is
	// still attached to the data mover cannot be consolidated.
	out, errs := c.cleanupHotAdds(ctx)
	// Instant recoveries a killed coffer served (vsinstant.Cleanup).
	inst, ierr := vsinstant.Cleanup(ctx, c.client, c.cfg.StateDir)
	if out = append(out, inst...); ierr != nil {
		errs = append(errs, ierr)
	}
	if len(errs) > 0 {
		return out, errors.Join(errs...)
	}
	js, err := loadJournals(c.cfg.StateDir)
	if err != nil {
		return out, err
	}
	for _, j := range js {
		if j.PID == os.Getpid() && isLive(j.Snapshot) || j.PID != os.Getpid() && statefile.ProcessAlive(j.PID) {
			continue // a session still in use, here or in another coffer
		}
		if !strings.HasPrefix(j.Snapshot, SnapshotPrefix) {
			continue // not a name coffer creates: never remove it
		}
		ref := hypervisor.VMRef{ID: j.VM, Name: j.VMName}
		vm := object.NewVirtualMachine(c.client, types.ManagedObjectReference{Type: "VirtualMachine", Value: j.VM})
		removed, inFlight, err := c.removeNamed(ctx, vm, j.Snapshot, j.StateID, c.cfg.Timeouts.SnapshotRemove)
		switch {
		case isNotFound(err):
			_ = j.remove() // a journal left behind is dropped by the next cleanup
			out = append(out, hypervisor.Leftover{VM: ref, Kind: "journal", Name: j.Snapshot, Action: "VM gone; journal dropped"})
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("vsphere: cleanup of %s on %s: %w", j.Snapshot, j.VMName, err))
			continue
		case removed:
			out = append(out, hypervisor.Leftover{VM: ref, Kind: "vm-snapshot", Name: j.Snapshot, Action: "removed"})
		case inFlight:
			// A creation may still produce the snapshot, or a removal is
			// still running: keep the journal for the next cleanup.
			out = append(out, hypervisor.Leftover{VM: ref, Kind: "vm-snapshot", Name: j.Snapshot, Action: "snapshot creation or removal still running; kept for the next cleanup"})
			continue
		}
		if j.Suspended {
			if err := c.powerOnIfSuspended(ctx, vm); err != nil {
				errs = append(errs, fmt.Errorf("vsphere: resume %s: %w", j.VMName, err))
				continue
			}
			out = append(out, hypervisor.Leftover{VM: ref, Kind: "suspended-vm", Name: j.VMName, Action: "resumed"})
		}
		if err := j.remove(); err != nil {
			errs = append(errs, err)
			continue
		}
		if j.PID == os.Getpid() {
			// A session of this process whose removal failed kept its VM
			// claimed (one coffer snapshot per VM); it is gone now.
			c.unclaim(j.VM)
		}
	}
	return out, errors.Join(errs...)
}

// powerOnIfSuspended resumes a VM coffer suspended, but leaves VMs that
// someone powered off or on meanwhile as they are.
func (c *Connector) powerOnIfSuspended(ctx context.Context, vm *object.VirtualMachine) error {
	var m mo.VirtualMachine
	if err := property.DefaultCollector(c.client).RetrieveOne(ctx, vm.Reference(), []string{"runtime.powerState"}, &m); err != nil {
		return err
	}
	if m.Runtime.PowerState != types.VirtualMachinePowerStateSuspended {
		return nil
	}
	return c.runTask(ctx, c.cfg.Timeouts.Setup, func(ctx context.Context) (*object.Task, error) { return vm.PowerOn(ctx) })
}
