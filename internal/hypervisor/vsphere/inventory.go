package vsphere

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// vmProps are the VM properties the inventory and a session need. They are
// deliberately narrow: asking for whole "config" objects costs ~20x more on
// a 1000-VM inventory (1.4 s instead of 75 ms on vcsim).
var vmProps = []string{"name", "config.instanceUuid", "config.changeTrackingEnabled",
	"config.hardware.device", "runtime.powerState", "runtime.host",
	"guest.toolsRunningStatus", "datastore"}

// Inventory lists all VMs (templates excluded) with one RetrieveProperties
// call over one container view holding VMs, hosts and datastores, so host
// and datastore names are resolved without further round trips.
func (c *Connector) Inventory(ctx context.Context) ([]hypervisor.VM, error) {
	all, err := c.retrieveAll(ctx)
	if err != nil {
		return nil, err
	}
	var out []hypervisor.VM
	for _, vm := range all.vms {
		out = append(out, all.toVM(vm))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

type inventory struct {
	vms        []mo.VirtualMachine
	hosts      map[types.ManagedObjectReference]string
	datastores map[types.ManagedObjectReference]string
	fields     map[int32]string // custom attribute key -> name
}

func (c *Connector) retrieveAll(ctx context.Context) (*inventory, error) {
	m := view.NewManager(c.client)
	v, err := m.CreateContainerView(ctx, c.client.ServiceContent.RootFolder,
		[]string{"VirtualMachine", "HostSystem", "Datastore"}, true)
	if err != nil {
		return nil, fmt.Errorf("vsphere: container view: %w", err)
	}
	defer func() { _ = v.Destroy(context.WithoutCancel(ctx)) }()
	ts := types.TraversalSpec{Type: "ContainerView", Path: "view", Skip: types.NewBool(false)}
	spec := types.PropertyFilterSpec{
		ObjectSet: []types.ObjectSpec{{Obj: v.Reference(), Skip: types.NewBool(true), SelectSet: []types.BaseSelectionSpec{&ts}}},
		PropSet: []types.PropertySpec{
			{Type: "VirtualMachine", PathSet: append([]string{"config.template", "customValue"}, vmProps...)},
			{Type: "HostSystem", PathSet: []string{"name"}},
			{Type: "Datastore", PathSet: []string{"name"}},
		},
	}
	if cfm := c.client.ServiceContent.CustomFieldsManager; cfm != nil {
		// Custom attribute names ride in the same call: VMs carry only
		// their keys, and policies select by name ("select: tags").
		spec.ObjectSet = append(spec.ObjectSet, types.ObjectSpec{Obj: *cfm})
		spec.PropSet = append(spec.PropSet, types.PropertySpec{Type: "CustomFieldsManager", PathSet: []string{"field"}})
	}
	content, err := retrieveAllPages(ctx, c, spec)
	if err != nil {
		return nil, fmt.Errorf("vsphere: inventory: %w", err)
	}
	inv := &inventory{hosts: map[types.ManagedObjectReference]string{}, datastores: map[types.ManagedObjectReference]string{}}
	for _, oc := range content {
		obj, err := mo.ObjectContentToType(oc)
		if err != nil {
			return nil, fmt.Errorf("vsphere: inventory: %w", err)
		}
		switch o := obj.(type) {
		case mo.VirtualMachine:
			if o.Config != nil && o.Config.Template {
				continue // templates cannot be snapshotted
			}
			inv.vms = append(inv.vms, o)
		case mo.CustomFieldsManager:
			inv.fields = map[int32]string{}
			for _, f := range o.Field {
				if f.ManagedObjectType == "" || f.ManagedObjectType == "VirtualMachine" {
					inv.fields[f.Key] = f.Name
				}
			}
		case mo.HostSystem:
			inv.hosts[o.Self] = o.Name
		case mo.Datastore:
			inv.datastores[o.Self] = o.Name
		}
	}
	return inv, nil
}

// retrieveAllPages runs one RetrievePropertiesEx and follows its
// continuation token: the server pages large results (vCenter: 100-1000
// objects a page).
func retrieveAllPages(ctx context.Context, c *Connector, spec types.PropertyFilterSpec) ([]types.ObjectContent, error) {
	pc := c.client.ServiceContent.PropertyCollector
	res, err := methods.RetrievePropertiesEx(ctx, c.client, &types.RetrievePropertiesEx{
		This: pc, SpecSet: []types.PropertyFilterSpec{spec}})
	if err != nil || res.Returnval == nil {
		return nil, err
	}
	out := res.Returnval.Objects
	for tok := res.Returnval.Token; tok != ""; {
		next, err := methods.ContinueRetrievePropertiesEx(ctx, c.client, &types.ContinueRetrievePropertiesEx{This: pc, Token: tok})
		if err != nil {
			return nil, err
		}
		out = append(out, next.Returnval.Objects...)
		tok = next.Returnval.Token
	}
	return out, nil
}

func (inv *inventory) toVM(vm mo.VirtualMachine) hypervisor.VM {
	out := hypervisor.VM{VMRef: hypervisor.VMRef{ID: vm.Self.Value, Name: vm.Name},
		PowerState: powerState(vm.Runtime.PowerState),
		GuestAgent: vm.Guest != nil && vm.Guest.ToolsRunningStatus == string(types.VirtualMachineToolsRunningStatusGuestToolsRunning)}
	if vm.Runtime.Host != nil {
		out.Host = inv.hosts[*vm.Runtime.Host]
	}
	for _, cv := range vm.CustomValue {
		if sv, ok := cv.(*types.CustomFieldStringValue); ok && inv.fields[sv.Key] != "" {
			if out.Tags == nil {
				out.Tags = map[string]string{}
			}
			out.Tags[inv.fields[sv.Key]] = sv.Value
		}
	}
	seen := map[string]bool{}
	for _, ds := range vm.Datastore {
		if n := inv.datastores[ds]; n != "" && !seen[n] {
			seen[n] = true
			out.Datastores = append(out.Datastores, n)
		}
	}
	if vm.Config != nil {
		out.ChangeTracking = vm.Config.ChangeTrackingEnabled != nil && *vm.Config.ChangeTrackingEnabled
		out.Disks = disksOf(vm.Config.Hardware.Device)
		for _, d := range out.Disks { // datastores of disks, even if "datastore" lags
			if d.Datastore != "" && !seen[d.Datastore] {
				seen[d.Datastore] = true
				out.Datastores = append(out.Datastores, d.Datastore)
			}
		}
	}
	return out
}

func powerState(s types.VirtualMachinePowerState) string {
	switch s {
	case types.VirtualMachinePowerStatePoweredOn:
		return "running"
	case types.VirtualMachinePowerStateSuspended:
		return "suspended"
	default:
		return "stopped"
	}
}

// disksOf lists the virtual disks of a device list; the key is the device
// key, which stays stable across snapshots and reconfigurations.
func disksOf(devs []types.BaseVirtualDevice) []hypervisor.DiskInfo {
	var out []hypervisor.DiskInfo
	for _, d := range devs {
		vd, ok := d.(*types.VirtualDisk)
		if !ok {
			continue
		}
		info := hypervisor.DiskInfo{Key: fmt.Sprint(vd.Key), Size: diskBytes(vd), Format: "vmdk"}
		if di := vd.DeviceInfo; di != nil {
			info.Name = di.GetDescription().Label
		}
		if fb, ok := vd.Backing.(types.BaseVirtualDeviceFileBackingInfo); ok {
			info.Path = fb.GetVirtualDeviceFileBackingInfo().FileName
			info.Datastore, _ = splitDSPath(info.Path)
		}
		if _, ok := vd.Backing.(*types.VirtualDiskFlatVer2BackingInfo); ok {
			info.Format = "vmdk-flat"
		}
		out = append(out, info)
	}
	return out
}

func diskBytes(vd *types.VirtualDisk) int64 {
	if vd.CapacityInBytes > 0 {
		return vd.CapacityInBytes
	}
	return vd.CapacityInKB * 1024
}

// splitDSPath splits "[ds] dir/file.vmdk" into "ds" and "dir/file.vmdk".
func splitDSPath(p string) (string, string) {
	if !strings.HasPrefix(p, "[") {
		return "", p
	}
	i := strings.Index(p, "]")
	if i < 0 {
		return "", p
	}
	return p[1:i], strings.TrimSpace(p[i+1:])
}
