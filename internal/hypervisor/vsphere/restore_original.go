package vsphere

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/ranged"
)

// restoreOriginal prepares writing a backup back onto the original VM's
// disks, which the caller only asks for (NewVMOptions.ReplaceExisting)
// after an explicit confirmation. The VM is found by its recorded instance
// UUID (or name); it must be powered off and have no snapshots, and every
// recorded disk must still be there with the same device key and size.
// Nothing else about the VM is changed.
func (c *Connector) restoreOriginal(ctx context.Context, cfg hypervisor.VMConfig, o hypervisor.NewVMOptions) (hypervisor.NewVM, error) {
	ref, err := c.originalVM(ctx, cfg, o.Name)
	if err != nil {
		return nil, err
	}
	var vm mo.VirtualMachine
	if err := property.DefaultCollector(c.client).RetrieveOne(ctx, ref, []string{"name", "runtime.powerState", "runtime.host", "snapshot", "config.hardware.device"}, &vm); err != nil {
		return nil, err
	}
	if vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOff {
		return nil, fmt.Errorf("vsphere: VM %s is %s; coffer never overwrites the disks of a running VM: power it off first", vm.Name, vm.Runtime.PowerState)
	}
	if vm.Snapshot != nil {
		// The current disks are deltas then: writing the base extents
		// would corrupt the chain.
		return nil, fmt.Errorf("vsphere: VM %s has snapshots; remove them before restoring onto its disks: %w", vm.Name, hypervisor.ErrUnsupported)
	}
	nv := &newVM{c: c, ref: ref, name: vm.Name, host: hostOf(vm), original: true, disks: map[string]DiskLocation{}}
	for _, d := range cfg.Disks {
		var found *types.VirtualDisk
		for _, dev := range vm.Config.Hardware.Device {
			if vd, ok := dev.(*types.VirtualDisk); ok && strconv.Itoa(int(vd.Key)) == d.Key {
				found = vd
			}
		}
		if found == nil || diskBytes(found) != d.Size {
			return nil, fmt.Errorf("vsphere: VM %s no longer has disk %s (%s) of %d bytes; restore to a new VM instead", vm.Name, d.Key, d.Name, d.Size)
		}
		b, ok := found.Backing.(*types.VirtualDiskFlatVer2BackingInfo)
		if !ok {
			return nil, fmt.Errorf("vsphere: disk %s of %s is not a flat disk: %w", d.Name, vm.Name, hypervisor.ErrUnsupported)
		}
		ds, path := splitDSPath(b.FileName)
		dc, err := c.datacenterOf(ctx, b.Datastore, ds)
		if err != nil {
			return nil, err
		}
		nv.disks[d.Key] = DiskLocation{Datacenter: dc, Datastore: ds, Descriptor: path, Size: d.Size, Host: nv.host}
	}
	if o.Resume {
		return nil, fmt.Errorf("vsphere: --resume takes up a restore to a new VM; restore onto the original again: %w", hypervisor.ErrUnsupported)
	}
	// Progress of an earlier restore onto this VM means nothing now:
	// the VM may have run since.
	if err := ranged.Forget(c.cfg.StateDir, ref.Value); err != nil {
		return nil, err
	}
	nv.ranged(o)
	return nv, nil
}

// originalVM finds the VM a configuration was recorded from (by instance
// UUID, else by name).
func (c *Connector) originalVM(ctx context.Context, cfg hypervisor.VMConfig, name string) (types.ManagedObjectReference, error) {
	if cfg.UUID != "" {
		res, err := methods.FindByUuid(ctx, c.client, &types.FindByUuid{This: *c.client.ServiceContent.SearchIndex,
			Uuid: cfg.UUID, VmSearch: true, InstanceUuid: types.NewBool(true)})
		if err != nil {
			return types.ManagedObjectReference{}, err
		}
		if res.Returnval != nil {
			return *res.Returnval, nil
		}
	}
	if name == "" {
		name = cfg.Name
	}
	vms, err := c.Inventory(ctx)
	if err != nil {
		return types.ManagedObjectReference{}, err
	}
	for _, vm := range vms {
		if vm.Name == name {
			return types.ManagedObjectReference{Type: "VirtualMachine", Value: vm.ID}, nil
		}
	}
	return types.ManagedObjectReference{}, fmt.Errorf("vsphere: original VM %q: %w", name, hypervisor.ErrNotFound)
}

// errOriginalAbort: an interrupted restore onto the original disks cannot
// be undone; the VM stays powered off for the operator to decide.
var errOriginalAbort = errors.New("vsphere: restore onto the original VM interrupted: its disks may be partly overwritten; the VM was left powered off")

// resolve turns a VMRef into the MoRef form sessions use: inventory IDs
// are MoRefs already; an instance UUID (a configuration's UUID) or a bare
// name (a command line) is looked up.
func (c *Connector) resolve(ctx context.Context, ref hypervisor.VMRef) (hypervisor.VMRef, error) {
	if strings.HasPrefix(ref.ID, "vm-") || (ref.ID != "" && !strings.Contains(ref.ID, "-")) {
		return ref, nil // a MoRef ("vm-42" on vCenter, "42" on ESXi)
	}
	moref, err := c.originalVM(ctx, hypervisor.VMConfig{UUID: ref.ID, Name: ref.Name}, ref.Name)
	if err != nil {
		return ref, err
	}
	ref.ID = moref.Value
	return ref, nil
}
