// Package vsinstant runs a vSphere backup point's VM from coffer's NFS
// export (internal/instant/nfsserve): the export is mounted as a NAS
// datastore on an ESXi host, the VM is created there on the served disks
// and powered on; commit moves it to production storage with Storage
// vMotion (RelocateVM_Task) and unmounts, discard powers it off,
// unregisters it and unmounts. A journal (Record) precedes each object
// coffer makes, and Cleanup removes what a killed coffer left.
package vsinstant

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/restoredevs"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/vmconfig"
)

// Options say where the VM runs.
type Options struct {
	// Host is the ESXi host's inventory name ("" = the first connected
	// host).
	Host string
	// NFSHost and NFSPath are the export as the host reaches it.
	NFSHost, NFSPath string
	// Datastore is the NAS datastore's name; Name the VM's, which is also
	// its directory in the export (nfsserve.DescriptorName).
	Datastore, Name string
	Log             *slog.Logger
}

// Start mounts the export on the host, checks that the datastore shows
// the export's disks, creates the VM on them and powers it on; rec is
// saved before each step. On failure what was made is removed.
func Start(ctx context.Context, c *vim25.Client, cfg hypervisor.VMConfig, rec *Record, o Options) (err error) {
	host, pool, folder, err := placement(ctx, c, o.Host)
	if err != nil {
		return err
	}
	rec.Host, rec.Datastore, rec.VMName = host.Reference().Value, o.Datastore, o.Name
	if err := rec.save(); err != nil {
		return err
	}
	defer func() {
		if err == nil {
			return
		}
		if derr := discard(context.WithoutCancel(ctx), c, rec); derr != nil {
			err = errors.Join(err, derr) // the journal stays for Cleanup
		} else {
			err = errors.Join(err, rec.remove())
		}
	}()
	dss, err := host.ConfigManager().DatastoreSystem(ctx)
	if err != nil {
		return err
	}
	ds, err := dss.CreateNasDatastore(ctx, types.HostNasVolumeSpec{RemoteHost: o.NFSHost, RemotePath: o.NFSPath,
		LocalPath: o.Datastore, AccessMode: string(types.HostMountModeReadWrite), Type: string(types.HostFileSystemVolumeFileSystemTypeNFS)})
	if err != nil {
		return fmt.Errorf("vsphere: mount %s:%s as datastore %s on %s: %w", o.NFSHost, o.NFSPath, o.Datastore, host.Name(), err)
	}
	rec.DatastoreID = ds.Reference().Value
	if err := rec.save(); err != nil {
		return err
	}
	if err := showsDisks(ctx, ds, o.Datastore, o.Name, len(cfg.Disks)); err != nil {
		return err
	}
	spec, err := vmSpec(cfg, o.Datastore, o.Name, o.Log)
	if err != nil {
		return err
	}
	task, err := folder.CreateVM(ctx, spec, pool, host)
	if err != nil {
		return fmt.Errorf("vsphere: register %s: %w", o.Name, err)
	}
	res, err := task.WaitForResult(ctx)
	if err != nil {
		return fmt.Errorf("vsphere: register %s: %w", o.Name, err)
	}
	rec.VM = res.Result.(types.ManagedObjectReference).Value
	if err := rec.save(); err != nil {
		return err
	}
	if err := wait(ctx, vmOf(c, rec).PowerOn); err != nil {
		return fmt.Errorf("vsphere: power on %s: %w", o.Name, err)
	}
	return nil
}

// placement is the host to mount on, its resource pool and its
// datacenter's VM folder.
func placement(ctx context.Context, c *vim25.Client, name string) (*object.HostSystem, *object.ResourcePool, *object.Folder, error) {
	f := find.NewFinder(c, true)
	dcs, err := f.DatacenterList(ctx, "*")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("vsphere: datacenters: %w", err)
	}
	pattern := "*"
	if name != "" {
		pattern = name
	}
	for _, dc := range dcs {
		f.SetDatacenter(dc)
		hosts, err := f.HostSystemList(ctx, pattern)
		if err != nil {
			continue
		}
		for _, h := range hosts {
			var m mo.HostSystem
			if err := h.Properties(ctx, h.Reference(), []string{"parent", "runtime.connectionState"}, &m); err != nil || m.Parent == nil ||
				m.Runtime.ConnectionState != types.HostSystemConnectionStateConnected {
				continue
			}
			var cr mo.ComputeResource
			if err := h.Properties(ctx, *m.Parent, []string{"resourcePool"}, &cr); err != nil || cr.ResourcePool == nil {
				continue
			}
			folders, err := dc.Folders(ctx)
			if err != nil {
				return nil, nil, nil, err
			}
			return h, object.NewResourcePool(c, *cr.ResourcePool), folders.VmFolder, nil
		}
	}
	if name != "" {
		return nil, nil, nil, fmt.Errorf("vsphere: no connected ESXi host %q", name)
	}
	return nil, nil, nil, errors.New("vsphere: no connected ESXi host to run the VM on")
}

// showsDisks checks, through the datastore browser, that the mounted
// datastore holds the export's descriptors: a datastore of that name that
// is not coffer's export (a mount the host resolved elsewhere) is refused
// before any VM is made on it.
func showsDisks(ctx context.Context, ds *object.Datastore, dsName, dir string, disks int) error {
	b, err := ds.Browser(ctx)
	if err != nil {
		return err
	}
	task, err := b.SearchDatastore(ctx, fmt.Sprintf("[%s] %s", dsName, dir), &types.HostDatastoreBrowserSearchSpec{MatchPattern: []string{"*.vmdk"}})
	if err != nil {
		return err
	}
	res, err := task.WaitForResult(ctx)
	if err != nil {
		return fmt.Errorf("vsphere: the mounted datastore does not show the export's directory %s, so it is not coffer's export: %w", dir, err)
	}
	found := map[string]bool{}
	if r, ok := res.Result.(types.HostDatastoreBrowserSearchResults); ok {
		for _, f := range r.File {
			found[f.GetFileInfo().Path] = true
		}
	}
	for i := range disks {
		name := path.Base(restoredevs.DiskFile("", dir, i))
		if !found[name] {
			return fmt.Errorf("vsphere: the mounted datastore does not show the export's disk %s (it shows %d files): it is not coffer's export", name, len(found))
		}
	}
	return nil
}

// vmSpec is the VM's configuration on the served disks: the recorded
// hardware, each disk attached as it is (no file operation).
func vmSpec(cfg hypervisor.VMConfig, ds, name string, log *slog.Logger) (types.VirtualMachineConfigSpec, error) {
	native, _ := vmconfig.Parse(cfg) // absent fields keep vSphere's defaults
	if native.GuestID == "" {
		native.GuestID = string(types.VirtualMachineGuestOsIdentifierOtherGuest64)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	spec := types.VirtualMachineConfigSpec{Name: name, GuestId: native.GuestID, Version: native.Version,
		NumCPUs: int32(max(cfg.CPUs, 1)), MemoryMB: max(cfg.MemoryMiB, 4), Firmware: cfg.Firmware,
		Files: &types.VirtualMachineFileInfo{VmPathName: fmt.Sprintf("[%s] %s/%s.vmx", ds, name, name)}}
	devs, err := restoredevs.Disks(nil, cfg, native, ds, name, log)
	if err != nil {
		return spec, err
	}
	changes, err := devs.ConfigSpec(types.VirtualDeviceConfigSpecOperationAdd)
	if err != nil {
		return spec, err
	}
	for _, ch := range changes {
		if _, ok := ch.GetVirtualDeviceConfigSpec().Device.(*types.VirtualDisk); ok {
			ch.GetVirtualDeviceConfigSpec().FileOperation = "" // the served disk, attached as it is
		}
	}
	spec.DeviceChange = changes
	return spec, nil
}

func vmOf(c *vim25.Client, rec *Record) *object.VirtualMachine {
	return object.NewVirtualMachine(c, types.ManagedObjectReference{Type: "VirtualMachine", Value: rec.VM})
}

func wait(ctx context.Context, start func(context.Context) (*object.Task, error)) error {
	t, err := start(ctx)
	if err != nil {
		return err
	}
	return t.Wait(ctx)
}

// Commit moves the VM's files and disks to datastore target with
// Storage vMotion while it runs, checks that none of its disks is left
// on the export, then unmounts the export. On failure the VM runs on from
// the export and the commit can be run again.
func Commit(ctx context.Context, c *vim25.Client, rec *Record, target string) error {
	f := find.NewFinder(c, true)
	dcs, err := f.DatacenterList(ctx, "*")
	if err != nil {
		return err
	}
	var ds *object.Datastore
	for _, dc := range dcs {
		f.SetDatacenter(dc)
		if ds, err = f.Datastore(ctx, target); err == nil {
			break
		}
	}
	if ds == nil {
		return fmt.Errorf("vsphere: commit: datastore %q not found", target)
	}
	vm := vmOf(c, rec)
	err = wait(ctx, func(ctx context.Context) (*object.Task, error) {
		return vm.Relocate(ctx, types.VirtualMachineRelocateSpec{Datastore: types.NewReference(ds.Reference())}, types.VirtualMachineMovePriorityDefaultPriority)
	})
	if err != nil {
		return fmt.Errorf("vsphere: relocate %s to %s: %w", rec.VMName, target, err)
	}
	var m mo.VirtualMachine
	if err := property.DefaultCollector(c).RetrieveOne(ctx, vm.Reference(), []string{"datastore"}, &m); err != nil {
		return err
	}
	for _, d := range m.Datastore {
		if d.Value == rec.DatastoreID {
			return fmt.Errorf("vsphere: after the relocation %s still uses datastore %s: the export stays mounted", rec.VMName, rec.Datastore)
		}
	}
	rec.Committed = true
	if err := rec.save(); err != nil {
		return err
	}
	if err := unmount(ctx, c, rec); err != nil {
		return err
	}
	return rec.remove()
}

// Discard powers the VM off, unregisters it (its files stay on the
// export, to be removed with it) and unmounts the export. A committed
// VM is left alone.
func Discard(ctx context.Context, c *vim25.Client, rec *Record) error {
	if err := discard(ctx, c, rec); err != nil {
		return err
	}
	return rec.remove()
}

func discard(ctx context.Context, c *vim25.Client, rec *Record) error {
	if rec.VM != "" && !rec.Committed {
		vm := vmOf(c, rec)
		state, err := vm.PowerState(ctx)
		switch {
		case notFound(err):
		case err != nil:
			return err
		default:
			if state != types.VirtualMachinePowerStatePoweredOff {
				if err := wait(ctx, vm.PowerOff); err != nil && !notFound(err) {
					return fmt.Errorf("vsphere: power off %s: %w", rec.VMName, err)
				}
			}
			if err := vm.Unregister(ctx); err != nil && !notFound(err) {
				return fmt.Errorf("vsphere: unregister %s: %w", rec.VMName, err)
			}
		}
		rec.VM = ""
		if err := rec.save(); err != nil {
			return err
		}
	}
	return unmount(ctx, c, rec)
}

// unmount removes the NAS datastore from the host (vSphere refuses while
// a VM uses it).
func unmount(ctx context.Context, c *vim25.Client, rec *Record) error {
	if rec.DatastoreID == "" {
		return nil
	}
	host := object.NewHostSystem(c, types.ManagedObjectReference{Type: "HostSystem", Value: rec.Host})
	dss, err := host.ConfigManager().DatastoreSystem(ctx)
	if err != nil {
		return err
	}
	ds := object.NewDatastore(c, types.ManagedObjectReference{Type: "Datastore", Value: rec.DatastoreID})
	if err := dss.Remove(ctx, ds); err != nil && !notFound(err) {
		return fmt.Errorf("vsphere: unmount datastore %s: %w", rec.Datastore, err)
	}
	rec.DatastoreID = ""
	return rec.save()
}

// notFound: the object is gone (removed by hand, or by an earlier try).
func notFound(err error) bool {
	if soap.IsSoapFault(err) {
		_, ok := soap.ToSoapFault(err).VimFault().(types.ManagedObjectNotFound)
		return ok
	}
	var te task.Error
	if errors.As(err, &te) {
		_, ok := te.Fault().(*types.ManagedObjectNotFound)
		return ok
	}
	return false
}
