package vsphere

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/moverdev"
	"github.com/coffer-backup/coffer/internal/statefile"
)

// HotAdd is the hot-add transport: coffer runs in a VM of the same
// vSphere (the data mover, Config.DataMoverVM), and each frozen disk is
// attached to that VM as an extra virtual disk backed by the snapshot's
// base file, read as a local block device, and detached again. The bytes
// never cross the management network: they come over the storage path of
// the host running the data mover.
//
// The disk is attached independent-nonpersistent: whatever the data
// mover's OS might write goes to a redo log that is discarded at detach,
// never into the base file. Detaching never deletes a file (no file
// operation). Every attachment is journalled before the reconfiguration
// is requested, so a killed coffer's next start detaches it
// (CleanupLeftovers) before it removes the snapshot.
type HotAdd struct {
	c      *Connector
	writer DiskWriter // restores do not hot-add: they write through HTTPS
	// Devices finds the attached disk's block device in this VM
	// (default: LinuxDevices).
	Devices DeviceFinder

	mu    sync.Mutex // one reconfiguration of the data mover at a time
	mover *types.ManagedObjectReference
}

// AttachedDisk is a disk as the data-mover VM got it.
type AttachedDisk struct {
	File string // "[ds] vm/disk.vmdk"
	Key  int32  // device key in the data mover
	UUID string // the virtual disk's UUID (the guest's WWN, with disk.EnableUUID)
	Bus  int32  // SCSI controller bus number
	Unit int32
}

// DeviceFinder finds the block device an attached disk appears as in the
// data-mover VM.
type DeviceFinder interface {
	Device(ctx context.Context, d AttachedDisk) (string, error)
}

func newHotAdd(c *Connector, writer DiskWriter) *HotAdd {
	return &HotAdd{c: c, writer: writer, Devices: cmp.Or[DeviceFinder](c.cfg.MoverDevices, LinuxDevices{})}
}

func (h *HotAdd) Name() string { return "hot-add" }

// WriteDisk implements DiskWriter through the HTTPS transport.
func (h *HotAdd) WriteDisk(ctx context.Context, loc DiskLocation, src hypervisor.DiskSource) error {
	return h.writer.WriteDisk(ctx, loc, src)
}

// writeRouted passes on the route of the HTTPS transport it writes with.
func (h *HotAdd) writeRouted(ctx context.Context, loc DiskLocation, src hypervisor.DiskSource) (routed, error) {
	if rw, ok := h.writer.(routedWriter); ok {
		return rw.writeRouted(ctx, loc, src)
	}
	return routed{route: "with the datastore-https transport"}, h.writer.WriteDisk(ctx, loc, src)
}

// OpenDisk implements Transport: attach, find the device, open it.
func (h *HotAdd) OpenDisk(ctx context.Context, loc DiskLocation) (DiskData, error) {
	file := fmt.Sprintf("[%s] %s", loc.Datastore, loc.Descriptor)
	d, dev, err := h.attachDevice(ctx, loc.VM, file, types.VirtualDiskModeIndependent_nonpersistent, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	return &routedDisk{DiskData: d, route: fmt.Sprintf("by hot-add: attached to data-mover VM %s (unit %d:%d), read from %s",
		h.c.cfg.DataMoverVM, d.att.Bus, d.att.Unit, dev)}, nil
}

// attachDevice attaches file (a disk of VM vm, "" for none yet) to the
// data mover in mode, journalled first, and opens its device with flag.
func (h *HotAdd) attachDevice(ctx context.Context, vm, file string, mode types.VirtualDiskMode, flag int) (*hotAddDisk, string, error) {
	mover, err := h.moverRef(ctx)
	if err != nil {
		return nil, "", err
	}
	if mover.Value == vm {
		return nil, "", fmt.Errorf("vsphere: hot-add: the data-mover VM %s cannot read its own disks: %w", h.c.cfg.DataMoverVM, hypervisor.ErrUnsupported)
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	j := &hotAddJournal{ID: hex.EncodeToString(id[:]), StateID: h.c.stateID, PID: os.Getpid(), Mover: mover.Value, VM: vm,
		File: file, Created: time.Now().UTC()}
	j.path = filepath.Join(hotAddDir(h.c.cfg.StateDir), j.ID+".json")
	liveHotAdds.Store(j.ID, true)
	if err := j.save(); err != nil {
		liveHotAdds.Delete(j.ID)
		return nil, "", err
	}
	d := &hotAddDisk{h: h, j: j, mover: mover}
	att, err := h.attach(ctx, mover, j.File, mode)
	var dev string
	if err == nil {
		d.att = att
		fctx, cancel := context.WithTimeout(ctx, h.c.cfg.Timeouts.Setup)
		if dev, err = h.Devices.Device(fctx, att); err == nil {
			d.f, err = os.OpenFile(dev, flag, 0)
		}
		cancel()
		if err != nil {
			err = fmt.Errorf("vsphere: hot-add: %s attached to %s, but its device: %w", j.File, h.c.cfg.DataMoverVM, err)
		}
	} else if errors.Is(err, hypervisor.ErrTransient) {
		// The reconfiguration outlived its timeout and may still attach
		// the disk: the journal stays for cleanup.
		d.keep = true
	}
	if err != nil {
		// Detach on this path too; the journal stays if that fails.
		return nil, "", errors.Join(err, d.Close())
	}
	return d, dev, nil
}

// moverRef finds the data-mover VM by name, once.
func (h *HotAdd) moverRef(ctx context.Context) (types.ManagedObjectReference, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mover != nil {
		return *h.mover, nil
	}
	ref, err := h.c.vmByName(ctx, h.c.cfg.DataMoverVM)
	if err != nil {
		return ref, fmt.Errorf("vsphere: hot-add: data-mover VM: %w", err)
	}
	h.mover = &ref
	return ref, nil
}

// vmByName finds the one VM called name.
func (c *Connector) vmByName(ctx context.Context, name string) (types.ManagedObjectReference, error) {
	v, err := view.NewManager(c.client).CreateContainerView(ctx, c.client.ServiceContent.RootFolder, []string{"VirtualMachine"}, true)
	if err != nil {
		return types.ManagedObjectReference{}, err
	}
	defer func() { _ = v.Destroy(context.WithoutCancel(ctx)) }()
	refs, err := v.Find(ctx, []string{"VirtualMachine"}, property.Match{"name": name})
	switch {
	case err != nil:
		return types.ManagedObjectReference{}, err
	case len(refs) == 0:
		return types.ManagedObjectReference{}, fmt.Errorf("no VM named %q: %w", name, hypervisor.ErrNotFound)
	case len(refs) > 1:
		return types.ManagedObjectReference{}, fmt.Errorf("%d VMs are named %q; name the data mover uniquely", len(refs), name)
	}
	return refs[0], nil
}

// attach adds file to the data mover as a disk on a free unit of one of
// its SCSI controllers: independent-nonpersistent to read a snapshot's
// base (nothing written reaches it), independent-persistent to fill a
// restored disk (written straight into it, whatever snapshots the data
// mover has).
func (h *HotAdd) attach(ctx context.Context, mover types.ManagedObjectReference, file string, mode types.VirtualDiskMode) (AttachedDisk, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	devs, err := h.c.devicesOf(ctx, mover)
	if err != nil {
		return AttachedDisk{}, err
	}
	ctrl, unit, bus, err := moverdev.FreeSCSIUnit(devs)
	if err != nil {
		return AttachedDisk{}, fmt.Errorf("vsphere: hot-add to %s: %w", h.c.cfg.DataMoverVM, err)
	}
	disk := &types.VirtualDisk{VirtualDevice: types.VirtualDevice{Key: -1, ControllerKey: ctrl, UnitNumber: &unit,
		Backing: &types.VirtualDiskFlatVer2BackingInfo{DiskMode: string(mode),
			VirtualDeviceFileBackingInfo: types.VirtualDeviceFileBackingInfo{FileName: file}}}}
	spec := types.VirtualMachineConfigSpec{DeviceChange: []types.BaseVirtualDeviceConfigSpec{
		&types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationAdd, Device: disk}}} // no file operation: attach the existing file
	vm := object.NewVirtualMachine(h.c.client, mover)
	if err := h.c.runTask(ctx, h.c.cfg.Timeouts.Setup, func(ctx context.Context) (*object.Task, error) { return vm.Reconfigure(ctx, spec) }); err != nil {
		return AttachedDisk{}, fmt.Errorf("vsphere: hot-add %s to %s: %w", file, h.c.cfg.DataMoverVM, err)
	}
	if devs, err = h.c.devicesOf(ctx, mover); err != nil {
		return AttachedDisk{}, err
	}
	for _, d := range attachedAs(devs, file) {
		if d.Unit == unit && d.ControllerKey() == ctrl {
			d.Bus = bus
			return d.AttachedDisk, nil
		}
	}
	return AttachedDisk{}, fmt.Errorf("vsphere: hot-add: %s does not show among %s's disks after the reconfiguration", file, h.c.cfg.DataMoverVM)
}

// detach removes every disk of the data mover backed by file, without a
// file operation: the file itself stays.
func (c *Connector) detach(ctx context.Context, mover types.ManagedObjectReference, file string) (int, error) {
	devs, err := c.devicesOf(ctx, mover)
	if err != nil {
		return 0, err
	}
	var change []types.BaseVirtualDeviceConfigSpec
	for _, d := range attachedAs(devs, file) {
		change = append(change, &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationRemove, Device: d.dev})
	}
	if len(change) == 0 {
		return 0, nil
	}
	vm := object.NewVirtualMachine(c.client, mover)
	err = c.runTask(ctx, c.cfg.Timeouts.Setup, func(ctx context.Context) (*object.Task, error) {
		return vm.Reconfigure(ctx, types.VirtualMachineConfigSpec{DeviceChange: change})
	})
	return len(change), err
}

func (c *Connector) devicesOf(ctx context.Context, vm types.ManagedObjectReference) ([]types.BaseVirtualDevice, error) {
	var m mo.VirtualMachine
	if err := property.DefaultCollector(c.client).RetrieveOne(ctx, vm, []string{"config.hardware.device"}, &m); err != nil {
		return nil, err
	}
	if m.Config == nil {
		return nil, errors.New("VM without a configuration")
	}
	return m.Config.Hardware.Device, nil
}

type attached struct {
	AttachedDisk
	dev *types.VirtualDisk
}

func (a attached) ControllerKey() int32 { return a.dev.ControllerKey }

// attachedAs are the VM's disks backed by file.
func attachedAs(devs []types.BaseVirtualDevice, file string) []attached {
	var out []attached
	for _, d := range devs {
		vd, ok := d.(*types.VirtualDisk)
		if !ok {
			continue
		}
		b, ok := vd.Backing.(*types.VirtualDiskFlatVer2BackingInfo)
		if !ok || b.FileName != file {
			continue
		}
		a := attached{AttachedDisk: AttachedDisk{File: file, Key: vd.Key, UUID: b.Uuid}, dev: vd}
		if vd.UnitNumber != nil {
			a.Unit = *vd.UnitNumber
		}
		out = append(out, a)
	}
	return out
}

// hotAddDisk is an attached disk open as a local device.
type hotAddDisk struct {
	h      *HotAdd
	j      *hotAddJournal
	mover  types.ManagedObjectReference
	att    AttachedDisk
	f      *os.File
	closed bool
	keep   bool // keep the journal: an attachment may still be under way
}

func (d *hotAddDisk) ReadAt(p []byte, off int64) (int, error) { return d.f.ReadAt(p, off) }

// Close closes the device and detaches the disk; the journal goes only
// once the data mover no longer has it, else cleanup detaches it later.
func (d *hotAddDisk) Close() error {
	if d.closed {
		return nil
	}
	var errs []error
	if d.f != nil {
		errs = append(errs, d.f.Close())
		d.f = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.h.c.cfg.Timeouts.Setup)
	defer cancel()
	d.h.mu.Lock()
	_, err := d.h.c.detach(ctx, d.mover, d.j.File)
	d.h.mu.Unlock()
	if err != nil {
		liveHotAdds.Delete(d.j.ID) // a cleanup in this process may retry it
		return errors.Join(append(errs, fmt.Errorf("vsphere: hot-add: detach %s from %s: %w", d.j.File, d.h.c.cfg.DataMoverVM, err))...)
	}
	d.closed = true
	liveHotAdds.Delete(d.j.ID)
	if !d.keep {
		errs = append(errs, statefile.Remove(d.j.path))
	}
	return errors.Join(errs...)
}
