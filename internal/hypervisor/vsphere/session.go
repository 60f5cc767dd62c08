package vsphere

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/snapdesc"
)

// SnapshotPrefix starts the name of every snapshot coffer creates; cleanup
// only ever considers snapshots with this prefix that a journal names.
const SnapshotPrefix = "coffer-"

// snapshotDescription starts the description of every snapshot coffer
// creates: with the prefix it tells coffer's snapshots from look-alikes.
const snapshotDescription = snapdesc.Prefix

// cofferSnapshot is a snapshot in the tree that coffer created, if any.
func cofferSnapshot(info *types.VirtualMachineSnapshotInfo) *types.VirtualMachineSnapshotTree {
	if info == nil {
		return nil
	}
	var walk func([]types.VirtualMachineSnapshotTree) *types.VirtualMachineSnapshotTree
	walk = func(ts []types.VirtualMachineSnapshotTree) *types.VirtualMachineSnapshotTree {
		for i := range ts {
			t := &ts[i]
			if strings.HasPrefix(t.Name, SnapshotPrefix) && strings.HasPrefix(t.Description, snapshotDescription) {
				return t
			}
			if n := walk(t.ChildSnapshotList); n != nil {
				return n
			}
		}
		return nil
	}
	return walk(info.RootSnapshotList)
}

var sessionProps = append([]string{"snapshot", "config.uuid", "config.hardware.numCPU", "config.hardware.memoryMB",
	"config.guestId", "config.firmware", "config.version", "config.bootOptions"}, vmProps...)

type session struct {
	c        *Connector
	vm       mo.VirtualMachine
	ref      hypervisor.VMRef
	req      hypervisor.SnapshotRequest
	to       hypervisor.Timeouts
	j        *journal
	snap     *types.ManagedObjectReference // nil in AsIs mode or after Release
	cfg      hypervisor.VMConfig
	disks    []hypervisor.DiskSnapshot
	locs     map[string]DiskLocation
	changed  map[string][]hypervisor.Extent // incremental change sets, by disk key
	memory   bool                           // the snapshot holds the VM's memory state
	mem      map[string]memoryLocation      // memory streams, by key (memory.go)
	warnings []string
	notes    []string                // how each disk is read, for the task log
	achieved hypervisor.SnapshotMode // what the snapshot really holds (take)
	closed   bool
	// removeTried: a removal was requested; retries check for it first.
	removeTried bool
}

// Snapshot implements hypervisor.Connector: one coffer-named VM snapshot,
// journalled before it is requested.
func (c *Connector) Snapshot(ctx context.Context, ref hypervisor.VMRef, req hypervisor.SnapshotRequest) (_ hypervisor.Session, err error) {
	if req.SessionID == "" {
		return nil, errors.New("vsphere: snapshot request without a session id")
	}
	if ref, err = c.resolve(ctx, ref); err != nil {
		return nil, err
	}
	if !c.claim(ref.ID) {
		return nil, fmt.Errorf("vsphere: %s already has a coffer snapshot session: %w", ref.Name, hypervisor.ErrTransient)
	}
	s := &session{c: c, ref: ref, req: req, to: mergeTimeouts(req.Timeouts, c.cfg.Timeouts),
		locs: map[string]DiskLocation{}, changed: map[string][]hypervisor.Extent{}}
	defer func() {
		if err != nil {
			c.unclaim(ref.ID)
		}
	}()
	moref := types.ManagedObjectReference{Type: "VirtualMachine", Value: ref.ID}
	if err := property.DefaultCollector(c.client).RetrieveOne(ctx, moref, sessionProps, &s.vm); err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("vsphere: VM %s: %w", ref.Name, hypervisor.ErrNotFound)
		}
		return nil, fmt.Errorf("vsphere: VM %s: %w", ref.Name, err)
	}
	if s.vm.Config == nil {
		return nil, fmt.Errorf("vsphere: VM %s has no configuration (inaccessible?): %w", ref.Name, hypervisor.ErrTransient)
	}
	if req.Mode != hypervisor.AsIs {
		// One coffer snapshot per VM, also across coffer processes and
		// installations: a second one would only lengthen the chain the
		// VM runs on. A dead owner's is removed first (owner.go).
		if err := s.clearDeadOwners(ctx, moref); err != nil {
			return nil, err
		}
	}
	if req.Track && (s.vm.Config.ChangeTrackingEnabled == nil || !*s.vm.Config.ChangeTrackingEnabled) {
		if err := c.enableCBT(ctx, moref, s.to.Setup); err != nil {
			s.warn("enabling changed block tracking failed: %v", err)
		} else {
			// Recorded here too, so this backup's reads already ask for
			// allocated areas (changeId "*") on the snapshot below.
			s.vm.Config.ChangeTrackingEnabled = types.NewBool(true)
			// CBT starts with the next stun/unstun cycle, which is the
			// snapshot below: the next backup can be incremental.
			s.warn("changed block tracking enabled; it takes effect with this snapshot, so this backup reads all allocated data")
		}
	}
	devices := s.vm.Config.Hardware.Device
	s.achieved = hypervisor.AsIs
	if req.Mode != hypervisor.AsIs {
		if devices, err = s.take(ctx, moref); err != nil {
			return nil, err
		}
	}
	if err := s.describe(ctx, devices); err != nil {
		_, _ = s.Close(context.WithoutCancel(ctx), false) // best effort after the error returned
		return nil, err
	}
	if s.memory {
		if err := s.describeMemory(ctx); err != nil {
			_, _ = s.Close(context.WithoutCancel(ctx), false) // best effort after the error returned
			return nil, err
		}
	}
	return s, nil
}

func (s *session) warn(f string, a ...any) {
	s.warnings = append(s.warnings, fmt.Sprintf(f, a...))
	s.c.log.Warn("vsphere: "+fmt.Sprintf(f, a...), "vm", s.ref.Name)
}

// take creates the snapshot as the mode asks and returns the devices of
// the snapshot's configuration (their backings name the frozen files).
func (s *session) take(ctx context.Context, vm types.ManagedObjectReference) ([]types.BaseVirtualDevice, error) {
	memory, quiesce := false, false
	poweredOn := s.vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn
	switch s.req.Mode {
	case hypervisor.CrashConsistent, "":
	case hypervisor.WithMemory:
		memory = poweredOn
		if !memory {
			s.warn("VM is %s: no memory to save, a plain snapshot is crash-consistent", s.vm.Runtime.PowerState)
		}
	case hypervisor.Quiesced:
		quiesce = true
		if s.vm.Guest == nil || s.vm.Guest.ToolsRunningStatus != string(types.VirtualMachineToolsRunningStatusGuestToolsRunning) {
			if s.req.Quiesce == hypervisor.QuiesceRequired {
				return nil, fmt.Errorf("vsphere: %s: VMware Tools not running: %w", s.ref.Name, hypervisor.ErrQuiesceFailed)
			}
			s.warn("VMware Tools not running; snapshot is crash-consistent instead of quiesced")
			quiesce = false
		}
	case hypervisor.Suspend:
		if !poweredOn {
			s.warn("VM is %s: coffer did not suspend it; the snapshot is crash-consistent", s.vm.Runtime.PowerState)
		}
	default:
		return nil, fmt.Errorf("vsphere: snapshot mode %q: %w", s.req.Mode, hypervisor.ErrUnsupported)
	}
	s.j = newJournal(s.c.cfg.StateDir, journalState{SessionID: s.req.SessionID, StateID: s.c.stateID,
		PID: os.Getpid(), VM: s.ref.ID, VMName: s.vm.Name, Snapshot: SnapshotPrefix + s.req.SessionID, Created: time.Now().UTC()})
	s.setLive(true)
	if err := s.j.save(); err != nil {
		s.setLive(false)
		return nil, err
	}
	vmo := object.NewVirtualMachine(s.c.client, vm)
	suspended := s.req.Mode == hypervisor.Suspend && poweredOn
	if suspended {
		s.j.Suspended = true
		if err := s.j.save(); err != nil {
			return nil, err
		}
		if err := s.c.runTask(ctx, s.to.Setup, func(ctx context.Context) (*object.Task, error) { return vmo.Suspend(ctx) }); err != nil {
			// The VM may or may not be suspended: the journal keeps
			// Suspended so cleanup powers it on either way.
			return nil, fmt.Errorf("vsphere: suspend %s: %w", s.ref.Name, err)
		}
		// The disks are quiet from here: the snapshot is taken and the VM
		// resumed at once (the same stop-snapshot-resume window as QEMU),
		// instead of keeping the VM down for the whole copy.
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.to.Setup)
			defer cancel()
			if err := s.c.runTask(cctx, s.to.Setup, func(ctx context.Context) (*object.Task, error) { return vmo.PowerOn(ctx) }); err != nil {
				s.warn("powering %s back on failed: %v (cleanup retries)", s.ref.Name, err)
				return
			}
			s.j.Suspended = false
			_ = s.j.save() // a stale Suspended only makes cleanup power the VM on again
		}()
	}
	desc := snapdesc.Of(s.req.SessionID, s.c.stateID, s.req.Owner)
	if suspended {
		desc = snapdesc.OfSuspended(s.req.SessionID, s.c.stateID, s.req.Owner)
	}
	timeout := s.to.SnapshotCreate
	if quiesce {
		timeout += s.to.Quiesce
	}
	var res types.AnyType
	err := s.c.runTaskResult(ctx, timeout, func(ctx context.Context) (*object.Task, error) {
		return vmo.CreateSnapshot(ctx, s.j.Snapshot, desc, memory, quiesce)
	}, &res)
	if err != nil && quiesce && isQuiesceFault(err) {
		if s.req.Quiesce == hypervisor.QuiesceRequired {
			s.abandon(ctx)
			return nil, fmt.Errorf("vsphere: %s: %v: %w", s.ref.Name, err, hypervisor.ErrQuiesceFailed)
		}
		s.warn("quiesced snapshot failed (%v); retried crash-consistent", err)
		quiesce = false
		err = s.c.runTaskResult(ctx, s.to.SnapshotCreate, func(ctx context.Context) (*object.Task, error) {
			return vmo.CreateSnapshot(ctx, s.j.Snapshot, desc, memory, false)
		}, &res)
	}
	if err != nil {
		s.abandon(ctx)
		return nil, fmt.Errorf("vsphere: create snapshot of %s: %w", s.ref.Name, err)
	}
	ref, ok := res.(types.ManagedObjectReference)
	if !ok {
		s.abandon(ctx)
		return nil, fmt.Errorf("vsphere: create snapshot of %s: task returned %T, not a snapshot", s.ref.Name, res)
	}
	s.snap = &ref
	s.memory = memory
	s.achieved = achievedMode(quiesce, memory, suspended)
	var snap mo.VirtualMachineSnapshot
	if err := property.DefaultCollector(s.c.client).RetrieveOne(ctx, ref, []string{"config.hardware.device"}, &snap); err != nil {
		return nil, fmt.Errorf("vsphere: snapshot of %s: %w", s.ref.Name, err)
	}
	return snap.Config.Hardware.Device, nil
}

// achievedMode names what a created snapshot holds: the guest quiesced
// by Tools, the VM's memory, a VM suspended by coffer around it, or none
// of these (crash-consistent).
func achievedMode(quiesced, memory, suspended bool) hypervisor.SnapshotMode {
	switch {
	case quiesced:
		return hypervisor.Quiesced
	case memory:
		return hypervisor.WithMemory
	case suspended:
		return hypervisor.Suspend
	}
	return hypervisor.CrashConsistent
}

// abandon handles a failed or timed-out creation: if the snapshot exists
// anyway it is removed now; otherwise the journal is kept when a creation
// may still be running, so a later cleanup removes what it leaves.
func (s *session) abandon(ctx context.Context) {
	defer s.setLive(false)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.to.Setup)
	defer cancel()
	vm := object.NewVirtualMachine(s.c.client, types.ManagedObjectReference{Type: "VirtualMachine", Value: s.ref.ID})
	removed, inFlight, err := s.c.removeNamed(cctx, vm, s.j.Snapshot, s.c.stateID, s.to.SnapshotRemove)
	if err == nil && !inFlight && !s.j.Suspended {
		_ = s.j.remove() // a journal left behind is dropped by the next cleanup
	}
	if removed {
		s.c.log.Info("vsphere: removed snapshot of a failed session", "vm", s.ref.Name, "snapshot", s.j.Snapshot)
	}
}

// describe turns devices into the session's disks, change sets and config.
func (s *session) describe(ctx context.Context, devices []types.BaseVirtualDevice) error {
	cfg := s.vm.Config
	s.cfg = hypervisor.VMConfig{Kind: "vsphere", Name: s.vm.Name, UUID: cfg.InstanceUuid,
		CPUs: int(cfg.Hardware.NumCPU), MemoryMiB: int64(cfg.Hardware.MemoryMB), Firmware: cfg.Firmware,
		Disks: disksOf(devices), NICs: nicsOf(devices)}
	s.cfg.Native, _ = json.Marshal(nativeOf(cfg, devices))
	for _, d := range devices {
		vd, ok := d.(*types.VirtualDisk)
		if !ok {
			continue
		}
		info := disksOf([]types.BaseVirtualDevice{vd})[0]
		ds := hypervisor.DiskSnapshot{DiskInfo: info, Kind: hypervisor.KindDisk, Changes: "full"}
		flat, ok := vd.Backing.(*types.VirtualDiskFlatVer2BackingInfo)
		if !ok || flat.Parent != nil {
			// A sparse or delta base (the VM had snapshots of its own) has
			// no single flat extent to read over HTTPS.
			return fmt.Errorf("vsphere: disk %s of %s is not a flat disk without snapshots (%T): %w", info.Name, s.ref.Name, vd.Backing, hypervisor.ErrUnsupported)
		}
		dsName, path := splitDSPath(flat.FileName)
		dc, err := s.c.datacenterOf(ctx, flat.Datastore, dsName)
		if err != nil {
			return err
		}
		loc := DiskLocation{Datacenter: dc, Datastore: dsName, Descriptor: path, Size: info.Size, Key: info.Key, VM: s.ref.ID}
		if h := s.vm.Runtime.Host; h != nil {
			loc.Host = h.Value
		}
		s.locs[info.Key] = loc
		if flat.ChangeId != "" {
			ds.NewToken = encodeToken(changeToken{ChangeID: flat.ChangeId, Size: info.Size, VM: cfg.InstanceUuid, Path: flat.FileName})
		}
		s.planChanges(ctx, &ds, flat.ChangeId)
		s.disks = append(s.disks, ds)
	}
	return nil
}

func nicsOf(devs []types.BaseVirtualDevice) []hypervisor.NICConfig {
	var out []hypervisor.NICConfig
	for _, d := range devs {
		nic, ok := d.(types.BaseVirtualEthernetCard)
		if !ok {
			continue
		}
		card := nic.GetVirtualEthernetCard()
		n := hypervisor.NICConfig{Key: fmt.Sprint(card.Key), MAC: card.MacAddress, Model: fmt.Sprintf("%T", d)[len("*types."):]}
		switch b := card.Backing.(type) {
		case *types.VirtualEthernetCardNetworkBackingInfo:
			n.Network = b.DeviceName
		case *types.VirtualEthernetCardDistributedVirtualPortBackingInfo:
			n.Network = "dvportgroup:" + b.Port.PortgroupKey
		}
		out = append(out, n)
	}
	return out
}

// datacenterOf finds the inventory path of a datastore's datacenter, as
// the /folder URL's dcPath parameter needs it; cached per datastore.
func (c *Connector) datacenterOf(ctx context.Context, ref *types.ManagedObjectReference, name string) (string, error) {
	c.mu.Lock()
	dc, ok := c.dcPath[name]
	c.mu.Unlock()
	if ok {
		return dc, nil
	}
	if ref == nil {
		return "", fmt.Errorf("vsphere: datastore %s: no reference", name)
	}
	ds := object.NewDatastore(c.client, *ref)
	if err := ds.FindInventoryPath(ctx); err != nil {
		return "", fmt.Errorf("vsphere: datastore %s: %w", name, err)
	}
	c.mu.Lock()
	c.dcPath[name] = ds.DatacenterPath
	c.mu.Unlock()
	return ds.DatacenterPath, nil
}

func (c *Connector) enableCBT(ctx context.Context, vm types.ManagedObjectReference, timeout time.Duration) error {
	vmo := object.NewVirtualMachine(c.client, vm)
	return c.runTask(ctx, timeout, func(ctx context.Context) (*object.Task, error) {
		return vmo.Reconfigure(ctx, types.VirtualMachineConfigSpec{ChangeTrackingEnabled: types.NewBool(true)})
	})
}

func isNotFound(err error) bool {
	if soap.IsSoapFault(err) {
		_, ok := soap.ToSoapFault(err).VimFault().(types.ManagedObjectNotFound)
		return ok
	}
	return false
}

// isQuiesceFault: the guest could not be quiesced (Tools missing, a VSS
// writer failed, the freeze timed out).
func isQuiesceFault(err error) bool {
	var f any
	if te, ok := asTaskError(err); ok {
		f = te.Fault()
	} else if soap.IsSoapFault(err) {
		f = soap.ToSoapFault(err).VimFault()
	}
	// Faults arrive as values (SOAP detail) or pointers (task info):
	// compare the type name.
	name := strings.TrimPrefix(strings.TrimPrefix(fmt.Sprintf("%T", f), "*"), "types.")
	switch name {
	case "ApplicationQuiesceFault", "ToolsUnavailable", "Timedout", "ToolsInstallationInProgress", "InvalidPowerState":
		return true
	}
	return false
}
