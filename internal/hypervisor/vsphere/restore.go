package vsphere

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/ranged"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/restoredevs"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/vmconfig"
)

// DiskWriter is implemented by transports that can fill a disk of a
// powered-off VM at restore time.
type DiskWriter interface {
	WriteDisk(ctx context.Context, loc DiskLocation, src hypervisor.DiskSource) error
}

// ErrVMExists: restore refuses to create a VM under a name in use.
var ErrVMExists = errors.New("a VM with that name exists")

// CreateVM implements hypervisor.Restorer: a new, powered-off VM with the
// recorded CPUs, memory, firmware, guest OS, disks (same sizes, new flat
// files) and network adapters (same networks, new MAC addresses, so it can
// run next to the original). With ReplaceExisting (set only after an
// explicit confirmation) it writes onto the original VM's disks instead,
// see restoreOriginal; a running VM is never written.
func (c *Connector) CreateVM(ctx context.Context, cfg hypervisor.VMConfig, o hypervisor.NewVMOptions) (hypervisor.NewVM, error) {
	if cfg.Kind != "vsphere" {
		return nil, fmt.Errorf("vsphere: cannot restore a %q VM configuration: %w", cfg.Kind, hypervisor.ErrUnsupported)
	}
	if _, ok := c.transport.(DiskWriter); !ok {
		return nil, fmt.Errorf("vsphere: transport %s cannot write disks: %w", c.transport.Name(), hypervisor.ErrUnsupported)
	}
	if o.ReplaceExisting {
		return c.restoreOriginal(ctx, cfg, o)
	}
	if o.Name == "" {
		return nil, errors.New("vsphere: restore needs a name for the new VM")
	}
	if o.Resume {
		return c.resumeVM(ctx, cfg, o)
	}
	vms, err := c.Inventory(ctx)
	if err != nil {
		return nil, err
	}
	for _, vm := range vms {
		if vm.Name == o.Name {
			return nil, fmt.Errorf("vsphere: %q: %w", o.Name, ErrVMExists)
		}
	}
	dsName := o.Datastore
	if dsName == "" && len(cfg.Disks) > 0 {
		dsName = cfg.Disks[0].Datastore
	}
	p, err := c.placement(ctx, dsName)
	if err != nil {
		return nil, err
	}
	spec, err := c.restoreSpec(ctx, p, cfg, o.Name)
	if err != nil {
		return nil, err
	}
	var res types.AnyType
	err = c.runTaskResult(ctx, c.cfg.Timeouts.Setup, func(ctx context.Context) (*object.Task, error) {
		return p.folder.CreateVM(ctx, spec, p.pool, nil)
	}, &res)
	if err != nil {
		return nil, fmt.Errorf("vsphere: create VM %s: %w", o.Name, err)
	}
	ref, ok := res.(types.ManagedObjectReference)
	if !ok {
		return nil, fmt.Errorf("vsphere: create VM %s: task returned %T", o.Name, res)
	}
	nv := &newVM{c: c, ref: ref, name: o.Name, dcPath: p.dcPath, disks: map[string]DiskLocation{}}
	var vm mo.VirtualMachine
	if err := property.DefaultCollector(c.client).RetrieveOne(ctx, ref, []string{"config.hardware.device", "runtime.host"}, &vm); err != nil {
		_ = nv.Abort(context.WithoutCancel(ctx)) // best effort after the error returned
		return nil, err
	}
	nv.host = hostOf(vm)
	boot, err := nv.mapDisks(cfg, vm, p.ds)
	if err != nil {
		_ = nv.Abort(context.WithoutCancel(ctx)) // best effort after the error returned
		return nil, err
	}
	nv.ranged(o)
	rec := ranged.Record{VM: ref.Value, Name: o.Name, Point: o.Point, Datastore: p.ds, Created: time.Now().UTC()}
	if err := rec.Save(c.cfg.StateDir); err != nil {
		_ = nv.Abort(context.WithoutCancel(ctx)) // best effort after the error returned
		return nil, err
	}
	if boot != nil {
		// The boot order names device keys, which exist once the VM does.
		err := c.runTask(ctx, c.cfg.Timeouts.Setup, func(ctx context.Context) (*object.Task, error) {
			return object.NewVirtualMachine(c.client, ref).Reconfigure(ctx, types.VirtualMachineConfigSpec{BootOptions: &types.VirtualMachineBootOptions{
				BootOrder: []types.BaseVirtualMachineBootOptionsBootableDevice{&types.VirtualMachineBootOptionsBootableDiskDevice{DeviceKey: boot.Key}}}})
		})
		if err != nil {
			_ = nv.Abort(context.WithoutCancel(ctx)) // best effort after the error returned
			return nil, fmt.Errorf("vsphere: boot order of %s: %w", o.Name, err)
		}
	}
	return nv, nil
}

type placement struct {
	dcPath string
	ds     string
	folder *object.Folder
	pool   *object.ResourcePool
	finder *find.Finder
}

// placement finds the datastore, its datacenter's VM folder and the
// resource pool of a host that mounts the datastore.
func (c *Connector) placement(ctx context.Context, dsName string) (*placement, error) {
	f := find.NewFinder(c.client, true)
	dcs, err := f.DatacenterList(ctx, "*")
	if err != nil {
		return nil, fmt.Errorf("vsphere: datacenters: %w", err)
	}
	var ds *object.Datastore
	var dc *object.Datacenter
	for _, d := range dcs {
		f.SetDatacenter(d)
		if found, err := f.Datastore(ctx, dsName); err == nil {
			ds, dc = found, d
			break
		}
	}
	if ds == nil {
		return nil, fmt.Errorf("vsphere: restore datastore %q not found", dsName)
	}
	if err := ds.FindInventoryPath(ctx); err != nil {
		return nil, err
	}
	folders, err := dc.Folders(ctx)
	if err != nil {
		return nil, err
	}
	var dsm mo.Datastore
	if err := ds.Properties(ctx, ds.Reference(), []string{"host"}, &dsm); err != nil {
		return nil, err
	}
	for _, mount := range dsm.Host {
		var h mo.HostSystem
		if err := ds.Properties(ctx, mount.Key, []string{"parent"}, &h); err != nil || h.Parent == nil {
			continue
		}
		var cr mo.ComputeResource
		if err := ds.Properties(ctx, *h.Parent, []string{"resourcePool"}, &cr); err != nil || cr.ResourcePool == nil {
			continue
		}
		return &placement{dcPath: ds.DatacenterPath, ds: dsName, folder: folders.VmFolder,
			pool: object.NewResourcePool(c.client, *cr.ResourcePool), finder: f}, nil
	}
	return nil, fmt.Errorf("vsphere: no host mounts datastore %s", dsName)
}

// restoreSpec builds the new VM's configuration from the recorded one.
func (c *Connector) restoreSpec(ctx context.Context, p *placement, cfg hypervisor.VMConfig, name string) (types.VirtualMachineConfigSpec, error) {
	native, _ := vmconfig.Parse(cfg) // absent fields keep vSphere's defaults
	if native.GuestID == "" {
		native.GuestID = string(types.VirtualMachineGuestOsIdentifierOtherGuest64)
	}
	spec := types.VirtualMachineConfigSpec{Name: name, GuestId: native.GuestID, Version: native.Version,
		NumCPUs: int32(max(cfg.CPUs, 1)), MemoryMB: max(cfg.MemoryMiB, 4), Firmware: cfg.Firmware,
		Files: &types.VirtualMachineFileInfo{VmPathName: "[" + p.ds + "]"}}
	devs, err := restoredevs.Disks(nil, cfg, native, p.ds, name, c.log)
	if err != nil {
		return spec, err
	}
	for _, n := range cfg.NICs {
		net, err := p.finder.Network(ctx, n.Network)
		if err != nil {
			c.log.Warn("vsphere: restore: network not found; adapter left out", "network", n.Network, "err", err)
			continue
		}
		backing, err := net.EthernetCardBackingInfo(ctx)
		if err != nil {
			return spec, err
		}
		model := strings.ToLower(strings.TrimPrefix(n.Model, "Virtual"))
		card, err := object.EthernetCardTypes().CreateEthernetCard(model, backing)
		if err != nil {
			card, _ = object.EthernetCardTypes().CreateEthernetCard("vmxnet3", backing)
		}
		devs = append(devs, card)
	}
	changes, err := devs.ConfigSpec(types.VirtualDeviceConfigSpecOperationAdd)
	if err != nil {
		return spec, err
	}
	for _, ch := range changes {
		if _, ok := ch.GetVirtualDeviceConfigSpec().Device.(*types.VirtualDisk); ok {
			ch.GetVirtualDeviceConfigSpec().FileOperation = types.VirtualDeviceConfigSpecFileOperationCreate
		}
	}
	spec.DeviceChange = changes
	return spec, nil
}

type newVM struct {
	c        *Connector
	ref      types.ManagedObjectReference
	name     string
	host     string                  // the HostSystem the VM is registered on ("" unknown)
	original bool                    // the original VM's own disks: never destroyed
	disks    map[string]DiskLocation // recorded disk key -> disk to write

	notes, warnings []string // which way each disk went; fallbacks
	mu              sync.Mutex

	dcPath  string                   // the datacenter's inventory path
	journal string                   // the restore's journal directory
	job     rangedJob                // how disks are written in ranges
	slots   map[string]chan struct{} // each datastore's streams
	stats   ranged.Stats
}

// hostOf is the HostSystem (MoRef value) a VM is registered on, whose
// /folder service takes its disks' uploads; "" when unknown.
func hostOf(vm mo.VirtualMachine) string {
	if vm.Runtime.Host == nil {
		return ""
	}
	return vm.Runtime.Host.Value
}

// Notes implements hypervisor.Noter: which way each written disk's bytes
// went, for the restore's task log.
func (v *newVM) Notes() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.notes)
}

// Warnings are the restore's fallbacks (a disk written through vCenter
// because its host could not be used).
func (v *newVM) Warnings() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.warnings)
}

// note adds a line for the task log, and a warning when there is one;
// disks are written in parallel.
func (v *newVM) note(line, warning string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.notes = append(v.notes, line)
	if warning != "" {
		v.warnings = append(v.warnings, warning)
		v.c.log.Warn("vsphere: "+warning, "vm", v.name)
	}
}

func (v *newVM) Ref() hypervisor.VMRef { return hypervisor.VMRef{ID: v.ref.Value, Name: v.name} }

// WriteDisk implements hypervisor.NewVM. The VM's power state is checked
// before every disk: bytes are never written under a running guest.
func (v *newVM) WriteDisk(ctx context.Context, key string, src hypervisor.DiskSource) error {
	loc, ok := v.disks[key]
	if !ok {
		return fmt.Errorf("vsphere: restored VM %s has no disk for recorded disk %s", v.name, key)
	}
	if src.Size() > loc.Size {
		return fmt.Errorf("vsphere: disk %s: %d bytes do not fit a %d-byte disk", key, src.Size(), loc.Size)
	}
	var vm mo.VirtualMachine
	if err := property.DefaultCollector(v.c.client).RetrieveOne(ctx, v.ref, []string{"runtime.powerState"}, &vm); err != nil {
		return err
	}
	if vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOff {
		return fmt.Errorf("vsphere: VM %s is %s; coffer never writes the disks of a running VM", v.name, vm.Runtime.PowerState)
	}
	if rw, ok := v.c.transport.(rangedWriter); ok {
		return v.writeRanged(ctx, rw, loc, src)
	}
	w := v.c.transport.(DiskWriter)
	rw, ok := w.(routedWriter)
	if !ok {
		v.note(fmt.Sprintf("disk %s written with the %s transport", loc.Descriptor, v.c.transport.Name()), "")
		return w.WriteDisk(ctx, loc, src)
	}
	r, err := rw.writeRouted(ctx, loc, src)
	if err != nil {
		return err
	}
	v.note(fmt.Sprintf("disk %s written %s", loc.Descriptor, r.route), r.warning)
	return nil
}

// Start implements hypervisor.NewVM.
func (v *newVM) Start(ctx context.Context) error {
	vm := object.NewVirtualMachine(v.c.client, v.ref)
	return v.c.runTask(ctx, v.c.cfg.Timeouts.Setup, vm.PowerOn)
}

// Abort implements hypervisor.NewVM: the half-restored VM and its files go.
// The original VM is never deleted.
func (v *newVM) Abort(ctx context.Context) error {
	if v.original {
		return errOriginalAbort
	}
	vm := object.NewVirtualMachine(v.c.client, v.ref)
	var m mo.VirtualMachine
	if err := property.DefaultCollector(v.c.client).RetrieveOne(ctx, v.ref, []string{"runtime.powerState"}, &m); err == nil &&
		m.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOff {
		_ = v.c.runTask(ctx, v.c.cfg.Timeouts.Setup, vm.PowerOff)
	}
	if err := v.c.runTask(ctx, v.c.cfg.Timeouts.Setup, vm.Destroy); err != nil {
		return err
	}
	return ranged.Forget(v.c.cfg.StateDir, v.ref.Value)
}

// WriteDisk implements DiskWriter: one PUT of the whole flat extent
// (putDisk) through the connection's endpoint.
func (t *DatastoreHTTP) WriteDisk(ctx context.Context, loc DiskLocation, src hypervisor.DiskSource) error {
	flat, ok := flatExtent(loc.Descriptor)
	if !ok {
		return fmt.Errorf("vsphere: %s is not a .vmdk descriptor", loc.Descriptor)
	}
	return putDisk(ctx, t.Client.Client, object.NewDatastoreURL(*t.Client.URL(), loc.Datacenter, loc.Datastore, flat), nil, loc.Size, src)
}

var _ hypervisor.Restorer = (*Connector)(nil)
