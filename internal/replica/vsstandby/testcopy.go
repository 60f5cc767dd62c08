package vsstandby

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/failover"
	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// testCopyPrefix names a test failover's copies and their networks.
const testCopyPrefix = "coffer-test-"

// StartTestCopy starts a test failover's copy of the standby from its
// point seq (0: the newest): a linked clone of the point's snapshot,
// named after the run, whose network adapters are moved to a port group
// of a new virtual switch without uplinks on the standby's host (so the
// copy reaches nothing and nothing reaches it), then powered on. The
// standby itself is only read. The copy it returns, even with an error,
// discards what was made.
func (s Standby) StartTestCopy(ctx context.Context, run string, seq int) (failover.RemoteCopy, error) {
	cp := &testCopy{s: s, name: s.TestCopyName(run), net: testCopyNet(run, s.Name)}
	sb, err := findStandby(ctx, s.Client, s.Name)
	if err != nil {
		return cp, err
	}
	if sb == nil {
		return cp, fmt.Errorf("no standby VM %s (run the replication first): %w", s.Name, hypervisor.ErrNotFound)
	}
	if sb.mark != s.Mark {
		return cp, fmt.Errorf("%w: %s carries the mark %q, not %q", ErrNotStandby, s.Name, sb.mark, s.Mark)
	}
	ps, err := points(sb.vm)
	if err != nil {
		return cp, err
	}
	if seq == 0 && len(ps) > 0 {
		seq = ps[len(ps)-1].Seq
	}
	pt, err := pointOf(ps, seq)
	if err != nil {
		return cp, fmt.Errorf("standby %s: %w", s.Name, err)
	}
	var where mo.VirtualMachine
	if err := property.DefaultCollector(s.Client).RetrieveOne(ctx, sb.ref, []string{"parent", "resourcePool", "runtime.host"}, &where); err != nil {
		return cp, err
	}
	if where.Parent == nil || where.ResourcePool == nil || where.Runtime.Host == nil {
		return cp, fmt.Errorf("the standby %s has no folder, resource pool or host to clone it on", s.Name)
	}
	netRef, err := cp.isolate(ctx, *where.Runtime.Host)
	if err != nil {
		return cp, err
	}
	if err := cp.clone(ctx, sb, pt, where, netRef); err != nil {
		return cp, err
	}
	return cp, nil
}

// TestCopyName is the name of the standby's copy in the test run run.
func (s Standby) TestCopyName(run string) string { return testCopyPrefix + run + "-" + s.Name }

// testCopyNet names the switch and port group of the copy of standby in
// run: one of its own per copy, since the copies of a plan's group start
// at once and each removes its network when it ends. A hash stands for
// the standby's name, as a standard switch's name has at most 32
// characters.
func testCopyNet(run, standby string) string {
	sum := sha256.Sum256([]byte(standby))
	return testCopyPrefix + run + "-" + hex.EncodeToString(sum[:3])
}

// Host is the DR site's connection.
func (s Standby) Host() string { return s.Connection }

// testCopy is one standby's copy in a test failover, and its network.
type testCopy struct {
	s         Standby
	name, net string
	host      *object.HostSystem
	vm        *object.VirtualMachine
}

// isolate adds the virtual switch (without uplinks) and its port group.
func (c *testCopy) isolate(ctx context.Context, host types.ManagedObjectReference) (types.ManagedObjectReference, error) {
	c.host = object.NewHostSystem(c.s.Client, host)
	ns, err := c.host.ConfigManager().NetworkSystem(ctx)
	if err != nil {
		return types.ManagedObjectReference{}, err
	}
	if err := ns.AddVirtualSwitch(ctx, c.net, &types.HostVirtualSwitchSpec{NumPorts: 64}); err != nil {
		return types.ManagedObjectReference{}, fmt.Errorf("add the test failover's switch %s: %w", c.net, err)
	}
	if err := ns.AddPortGroup(ctx, types.HostPortGroupSpec{Name: c.net, VswitchName: c.net}); err != nil {
		return types.ManagedObjectReference{}, fmt.Errorf("add the test failover's port group %s: %w", c.net, err)
	}
	// The port group shows as a network of the host's datacenter, by its
	// name (unique: it carries the run's).
	v, err := view.NewManager(c.s.Client).CreateContainerView(ctx, c.s.Client.ServiceContent.RootFolder, []string{"Network"}, true)
	if err != nil {
		return types.ManagedObjectReference{}, err
	}
	defer func() { _ = v.Destroy(context.WithoutCancel(ctx)) }() // a view of the session
	refs, err := v.Find(ctx, []string{"Network"}, property.Match{"name": c.net})
	if err != nil {
		return types.ManagedObjectReference{}, err
	}
	if len(refs) == 1 {
		return refs[0], nil
	}
	return types.ManagedObjectReference{}, fmt.Errorf("the port group %s shows as %d networks, want 1", c.net, len(refs))
}

// clone makes the linked clone of point pt, moves its adapters to the
// isolated port group (connected at power-on), drops the standby's mark
// from it, and powers it on.
func (c *testCopy) clone(ctx context.Context, sb *standbyVM, pt Point, where mo.VirtualMachine, netRef types.ManagedObjectReference) error {
	snap := pt.Snapshot
	spec := types.VirtualMachineCloneSpec{Snapshot: &snap, Location: types.VirtualMachineRelocateSpec{Pool: where.ResourcePool, Host: where.Runtime.Host,
		DiskMoveType: string(types.VirtualMachineRelocateDiskMoveOptionsCreateNewChildDiskBacking)}}
	task, err := object.NewVirtualMachine(c.s.Client, sb.ref).Clone(ctx, object.NewFolder(c.s.Client, *where.Parent), c.name, spec)
	if err != nil {
		return err
	}
	res, err := task.WaitForResult(ctx)
	if err != nil {
		return fmt.Errorf("clone point %d of %s: %w", pt.Seq, c.s.Name, err)
	}
	c.vm = object.NewVirtualMachine(c.s.Client, res.Result.(types.ManagedObjectReference))
	var vm mo.VirtualMachine
	if err := c.vm.Properties(ctx, c.vm.Reference(), []string{"config.hardware.device"}, &vm); err != nil {
		return err
	}
	var devs []types.BaseVirtualDeviceConfigSpec
	for _, d := range vm.Config.Hardware.Device {
		if card, ok := d.(types.BaseVirtualEthernetCard); ok {
			e := card.GetVirtualEthernetCard()
			e.Backing = &types.VirtualEthernetCardNetworkBackingInfo{VirtualDeviceDeviceBackingInfo: types.VirtualDeviceDeviceBackingInfo{DeviceName: c.net}, Network: &netRef}
			e.Connectable = &types.VirtualDeviceConnectInfo{StartConnected: true, AllowGuestControl: true}
			devs = append(devs, &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationEdit, Device: d})
		}
	}
	spec2 := types.VirtualMachineConfigSpec{DeviceChange: devs, Annotation: fmt.Sprintf("coffer test failover copy of %s: coffer removes it", c.s.Name),
		ExtraConfig: []types.BaseOptionValue{&types.OptionValue{Key: markKey, Value: ""}, &types.OptionValue{Key: failoverKey, Value: ""}}}
	if err := reconfigure(ctx, c.s.Client, c.vm.Reference(), spec2); err != nil {
		return err
	}
	ptask, err := c.vm.PowerOn(ctx)
	if err == nil {
		err = ptask.Wait(ctx)
	}
	if err != nil {
		return fmt.Errorf("power on the test copy %s: %w", c.name, err)
	}
	return nil
}

// Name is the copy's VM name.
func (c *testCopy) Name() string { return c.name }

// Ready waits until vCenter reports the copy powered on.
func (c *testCopy) Ready(ctx context.Context) (string, error) {
	return poweredOn(ctx, c.s.Client, c.vm.Reference(), c.name)
}

// Discard powers the copy off and destroys it, then removes its port
// group and switch; what was not made is no error.
func (c *testCopy) Discard(ctx context.Context) error {
	var errs []error
	if c.vm != nil {
		if task, err := c.vm.PowerOff(ctx); err == nil {
			_ = task.Wait(ctx) // a copy already off fails here: Destroy says what matters
		}
		task, err := c.vm.Destroy(ctx)
		if err == nil {
			err = task.Wait(ctx)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("destroy the test copy %s: %w", c.name, err))
		}
	}
	if c.host != nil && len(errs) == 0 {
		ns, err := c.host.ConfigManager().NetworkSystem(ctx)
		if err == nil {
			err = notFoundIsGone(ns.RemovePortGroup(ctx, c.net))
		}
		if err == nil {
			err = notFoundIsGone(ns.RemoveVirtualSwitch(ctx, c.net))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("remove the test failover's network %s: %w", c.net, err))
		}
	}
	return errors.Join(errs...)
}

func notFoundIsGone(err error) error {
	if fault.Is(err, &types.NotFound{}) {
		return nil
	}
	return err
}

// testCopyNetOf is the network of the test copy named name.
func testCopyNetOf(name string) (string, bool) {
	run, standby, ok := strings.Cut(strings.TrimPrefix(name, testCopyPrefix), "-")
	if !strings.HasPrefix(name, testCopyPrefix) || !ok || run == "" {
		return "", false
	}
	return testCopyNet(run, standby), true
}

// DestroyTestCopy ends a killed test failover's copy named name, if it
// is there, and removes its run's port group and switch from every host
// that has them: the run may have died before or after it made either.
func DestroyTestCopy(ctx context.Context, c *vim25.Client, name string) error {
	net, ok := testCopyNetOf(name)
	if !ok {
		return fmt.Errorf("%s is not the name of a test failover's copy", name)
	}
	cp := &testCopy{name: name, net: net}
	cp.s.Client = c
	ref, err := vmNamed(ctx, c, name)
	if err != nil {
		return err
	}
	if ref != nil {
		cp.vm = object.NewVirtualMachine(c, *ref)
	}
	if err := cp.Discard(ctx); err != nil {
		return err
	}
	return removeNetworkEverywhere(ctx, c, cp.net)
}

func vmNamed(ctx context.Context, c *vim25.Client, name string) (*types.ManagedObjectReference, error) {
	v, err := view.NewManager(c).CreateContainerView(ctx, c.ServiceContent.RootFolder, []string{"VirtualMachine"}, true)
	if err != nil {
		return nil, err
	}
	defer func() { _ = v.Destroy(context.WithoutCancel(ctx)) }() // a view of the session
	refs, err := v.Find(ctx, []string{"VirtualMachine"}, property.Match{"name": name})
	if err != nil || len(refs) == 0 {
		return nil, err
	}
	return &refs[0], nil
}

// removeNetworkEverywhere removes the port group and switch named net
// from every host that has them.
func removeNetworkEverywhere(ctx context.Context, c *vim25.Client, net string) error {
	v, err := view.NewManager(c).CreateContainerView(ctx, c.ServiceContent.RootFolder, []string{"HostSystem"}, true)
	if err != nil {
		return err
	}
	defer func() { _ = v.Destroy(context.WithoutCancel(ctx)) }() // a view of the session
	hosts, err := v.Find(ctx, []string{"HostSystem"}, nil)
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hosts {
		cp := &testCopy{net: net, host: object.NewHostSystem(c, h)}
		errs = append(errs, cp.Discard(ctx))
	}
	return errors.Join(errs...)
}
