package vsphere

import (
	"cmp"
	"context"
	"fmt"

	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/ranged"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/restoredevs"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/vmconfig"
)

// mapDisks finds, for each recorded disk, the disk of the new VM built
// for it (restoredevs.DiskFile names its file), and returns the boot disk.
func (v *newVM) mapDisks(cfg hypervisor.VMConfig, vm mo.VirtualMachine, ds string) (*types.VirtualDisk, error) {
	created := map[string]*types.VirtualDisk{}
	for _, d := range vm.Config.Hardware.Device {
		if vd, ok := d.(*types.VirtualDisk); ok {
			if b, ok := vd.Backing.(*types.VirtualDiskFlatVer2BackingInfo); ok {
				created[b.FileName] = vd
			}
		}
	}
	var boot *types.VirtualDisk
	native, _ := vmconfig.Parse(cfg) // a point without placement has no boot disk
	for i, d := range cfg.Disks {
		vd := created[restoredevs.DiskFile(ds, v.name, i)]
		if vd == nil {
			return nil, fmt.Errorf("vsphere: VM %s has no disk for the recorded disk %s", v.name, d.Name)
		}
		dsName, path := splitDSPath(vd.Backing.(*types.VirtualDiskFlatVer2BackingInfo).FileName)
		v.disks[d.Key] = DiskLocation{Datacenter: v.dcPath, Datastore: dsName, Descriptor: path, Size: d.Size, Host: v.host}
		if native.BootDisk == d.Key {
			boot = vd
		}
	}
	return boot, nil
}

// ranged sets how the VM's disks are written in ranges, where the
// transport can: its journal, the streams per disk and per datastore,
// and the retries.
func (v *newVM) ranged(o hypervisor.NewVMOptions) {
	v.journal = ranged.Dir(v.c.cfg.StateDir, v.ref.Value)
	v.job = rangedJob{dir: v.journal, fresh: !v.original, streams: cmp.Or(max(o.Streams, 0), ranged.DefaultStreams), retries: o.Retries, log: v.c.log}
	v.slots = map[string]chan struct{}{}
	for _, loc := range v.disks {
		v.slots[loc.Datastore] = make(chan struct{}, cmp.Or(max(o.PerDatastore, 0), ranged.DefaultPerDatastore))
	}
}

// ParallelDisks implements hypervisor.ParallelWriter: the disks of a VM
// restored in ranges are written at the same time, each datastore
// bounding its own streams.
func (v *newVM) ParallelDisks() bool {
	_, ok := v.c.transport.(rangedWriter)
	return ok
}

// writeRanged writes one disk through a ranged transport and notes how.
func (v *newVM) writeRanged(ctx context.Context, rw rangedWriter, loc DiskLocation, src hypervisor.DiskSource) error {
	job := v.job
	job.slots = v.slots[loc.Datastore]
	r, st, err := rw.writeRanged(ctx, loc, src, job)
	v.mu.Lock()
	v.stats.Add(st)
	v.mu.Unlock()
	if err != nil {
		return err
	}
	holes := "skipped (the disk stays thin)"
	if !job.fresh {
		holes = fmt.Sprintf("zeroed in place (%d bytes, none sent)", st.Zeroed)
	}
	line := fmt.Sprintf("disk %s written %s: %d bytes of data in %d pieces over up to %d streams, holes %s",
		loc.Descriptor, r.route, st.Written, st.Pieces, job.streams, holes)
	if st.Resumed > 0 {
		line += fmt.Sprintf("; %d bytes were already written by the broken restore resumed", st.Resumed)
	}
	v.note(line, r.warning)
	return nil
}

// KeepForResume implements hypervisor.Resumer: a new VM whose disks
// broke on the device or the reconfiguration stays, journalled.
func (v *newVM) KeepForResume(err error) bool {
	return !v.original && v.journal != "" && ranged.IsBreak(err)
}

// Complete implements hypervisor.Completer: every disk is written, so
// the journal that would resume the restore goes.
func (v *newVM) Complete(context.Context) error {
	if v.journal == "" {
		return nil
	}
	return ranged.Forget(v.c.cfg.StateDir, v.ref.Value)
}

// resumeVM takes up a broken restore of o.Point into the VM called
// o.Name, which the journal names: the VM must still exist under that
// name and be powered off.
func (c *Connector) resumeVM(ctx context.Context, cfg hypervisor.VMConfig, o hypervisor.NewVMOptions) (hypervisor.NewVM, error) {
	rec, err := ranged.Find(c.cfg.StateDir, o.Name, o.Point)
	if err != nil {
		return nil, fmt.Errorf("vsphere: %w", err)
	}
	ref := types.ManagedObjectReference{Type: "VirtualMachine", Value: rec.VM}
	var vm mo.VirtualMachine
	err = property.DefaultCollector(c.client).RetrieveOne(ctx, ref, []string{"name", "config.hardware.device", "runtime.host", "runtime.powerState"}, &vm)
	if err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("vsphere: the VM %s of the broken restore is gone: restore again without --resume: %w",
				o.Name, ranged.Forget(c.cfg.StateDir, rec.VM))
		}
		return nil, err
	}
	if vm.Name != o.Name || vm.Config == nil {
		return nil, fmt.Errorf("vsphere: VM %s of the broken restore is now called %q: restore again without --resume", rec.VM, vm.Name)
	}
	if vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOff {
		return nil, fmt.Errorf("vsphere: VM %s is %s; a restore resumes only into a powered-off VM", o.Name, vm.Runtime.PowerState)
	}
	p, err := c.placement(ctx, rec.Datastore)
	if err != nil {
		return nil, err
	}
	nv := &newVM{c: c, ref: ref, name: o.Name, host: hostOf(vm), dcPath: p.dcPath, disks: map[string]DiskLocation{}}
	if _, err := nv.mapDisks(cfg, vm, rec.Datastore); err != nil {
		return nil, err
	}
	nv.ranged(o)
	return nv, nil
}

// RestoreStats reports what the ranged writes of the VM's disks sent so
// far (broken attempts included).
func (v *newVM) RestoreStats() ranged.Stats {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.stats
}
