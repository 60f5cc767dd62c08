package vsphere

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/vmconfig"
)

// TestPointRecordsDiskPlacement: a point of a VM with disks on a pvscsi,
// a SATA and an NVMe controller, whose boot order starts with the NVMe
// disk, records each disk's controller, bus and unit and that boot disk:
// what booting the point outside vSphere needs.
func TestPointRecordsDiskPlacement(t *testing.T) {
	ctx := context.Background()
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 0})
	c := s.client
	var dss []mo.Datastore
	if err := s.pc().Retrieve(ctx, s.find(ctx, "Datastore"), []string{"name", "summary"}, &dss); err != nil {
		t.Fatal(err)
	}
	var dcs []mo.Datacenter
	if err := s.pc().Retrieve(ctx, s.find(ctx, "Datacenter"), []string{"vmFolder"}, &dcs); err != nil {
		t.Fatal(err)
	}
	var pools []mo.ResourcePool
	if err := s.pc().Retrieve(ctx, s.find(ctx, "ResourcePool"), []string{"name"}, &pools); err != nil {
		t.Fatal(err)
	}
	ds := dss[0].Name
	var devs object.VirtualDeviceList
	for i, kind := range []string{"pvscsi", "sata", "nvme"} {
		// Each controller is created from the list so far, which gives
		// it a temporary key of its own.
		var ctrl types.BaseVirtualDevice
		var err error
		switch kind {
		case "sata":
			ctrl, err = devs.CreateSATAController()
		case "nvme":
			ctrl, err = devs.CreateNVMEController()
		default:
			ctrl, err = devs.CreateSCSIController(kind)
		}
		if err != nil {
			t.Fatal(err)
		}
		devs = append(devs, ctrl)
		disk := devs.CreateDisk(ctrl.(types.BaseVirtualController), types.ManagedObjectReference{}, fmt.Sprintf("[%s] placed/disk%d.vmdk", ds, i))
		disk.CapacityInKB = 1024
		devs = append(devs, disk)
	}
	changes, _ := devs.ConfigSpec(types.VirtualDeviceConfigSpecOperationAdd)
	for _, ch := range changes {
		if _, ok := ch.GetVirtualDeviceConfigSpec().Device.(*types.VirtualDisk); ok {
			ch.GetVirtualDeviceConfigSpec().FileOperation = types.VirtualDeviceConfigSpecFileOperationCreate
		}
	}
	task, err := object.NewFolder(c, dcs[0].VmFolder).CreateVM(ctx, types.VirtualMachineConfigSpec{Name: "placed", GuestId: "otherGuest",
		NumCPUs: 1, MemoryMB: 256, Files: &types.VirtualMachineFileInfo{VmPathName: "[" + ds + "]"}, DeviceChange: changes},
		object.NewResourcePool(c, pools[0].Self), nil)
	if err != nil {
		t.Fatal(err)
	}
	info, err := task.WaitForResult(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ref := info.Result.(types.ManagedObjectReference)
	vm := object.NewVirtualMachine(c, ref)
	got, err := vm.Device(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := url.Parse(dss[0].Summary.Url)
	want := map[string]vmconfig.Disk{}
	var nvmeDisk string
	for _, d := range got.SelectByType((*types.VirtualDisk)(nil)) {
		vd := d.(*types.VirtualDisk)
		_, rel, _ := strings.Cut(vd.Backing.(*types.VirtualDiskFlatVer2BackingInfo).FileName, "] ")
		if err := os.Truncate(filepath.Join(dir.Path, strings.TrimSuffix(rel, ".vmdk")+"-flat.vmdk"), 1<<20); err != nil {
			t.Fatal(err)
		}
		ctrl := got.FindByKey(vd.ControllerKey)
		kind := controllerKind(ctrl)
		key := fmt.Sprint(vd.Key)
		want[key] = vmconfig.Disk{Key: key, Controller: kind, Bus: ctrl.(types.BaseVirtualController).GetVirtualController().BusNumber,
			Unit: *vd.UnitNumber}
		if kind == vmconfig.NVMe {
			nvmeDisk = key
		}
	}
	if len(want) != 3 || nvmeDisk == "" {
		t.Fatalf("the simulator made %d disks: %v", len(want), want)
	}
	var nvmeKey int32
	fmt.Sscan(nvmeDisk, &nvmeKey)
	task, err = vm.Reconfigure(ctx, types.VirtualMachineConfigSpec{BootOptions: &types.VirtualMachineBootOptions{
		BootOrder: []types.BaseVirtualMachineBootOptionsBootableDevice{&types.VirtualMachineBootOptionsBootableDiskDevice{DeviceKey: nvmeKey}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Wait(ctx); err != nil {
		t.Fatal(err)
	}

	snap := runBackup(t, newRepo(t), s.connect(t, nil), hypervisor.VMRef{ID: ref.Value, Name: "placed"})
	var cfg hypervisor.VMConfig
	if err := json.Unmarshal(snap.VMConfig, &cfg); err != nil {
		t.Fatal(err)
	}
	native, err := vmconfig.Parse(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if native.BootDisk != nvmeDisk || len(native.Disks) != 3 {
		t.Fatalf("recorded %+v, want boot disk %s and 3 disks", native, nvmeDisk)
	}
	kinds := map[string]bool{}
	for _, d := range native.Disks {
		if d != want[d.Key] {
			t.Errorf("disk %s recorded as %+v, want %+v", d.Key, d, want[d.Key])
		}
		kinds[d.Controller] = true
	}
	if !kinds[vmconfig.PVSCSI] || !kinds[vmconfig.SATA] || !kinds[vmconfig.NVMe] {
		t.Errorf("controllers recorded: %v", kinds)
	}

	// Restored as a new VM, each disk sits where it sat, and the VM
	// boots from the same disk.
	nv, err := s.connect(t, nil).CreateVM(ctx, cfg, hypervisor.NewVMOptions{Name: "placed-restored"})
	if err != nil {
		t.Fatal(err)
	}
	var restored mo.VirtualMachine
	if err := s.pc().RetrieveOne(ctx, types.ManagedObjectReference{Type: "VirtualMachine", Value: nv.Ref().ID},
		[]string{"config.hardware.device", "config.bootOptions"}, &restored); err != nil {
		t.Fatal(err)
	}
	devices := object.VirtualDeviceList(restored.Config.Hardware.Device)
	placedAs := map[vmconfig.Disk]int{}
	for _, d := range native.Disks {
		placedAs[vmconfig.Disk{Controller: d.Controller, Bus: d.Bus, Unit: d.Unit}]++
	}
	var bootKey int32
	for _, d := range devices.SelectByType((*types.VirtualDisk)(nil)) {
		vd := d.(*types.VirtualDisk)
		ctrl := devices.FindByKey(vd.ControllerKey)
		at := vmconfig.Disk{Controller: controllerKind(ctrl), Bus: ctrl.(types.BaseVirtualController).GetVirtualController().BusNumber, Unit: *vd.UnitNumber}
		if placedAs[at] == 0 {
			t.Errorf("the restored VM has a disk on %+v, which the point did not record", at)
		}
		placedAs[at]--
		if at.Controller == vmconfig.NVMe {
			bootKey = vd.Key
		}
	}
	if bo := restored.Config.BootOptions; bo == nil || len(bo.BootOrder) != 1 ||
		bo.BootOrder[0].(*types.VirtualMachineBootOptionsBootableDiskDevice).DeviceKey != bootKey {
		t.Fatalf("the restored VM's boot order %+v, want its NVMe disk %d", bo, bootKey)
	}
}

// TestRestorePlacesIDEAndLSIDisks: a point whose disks sat on IDE (the
// two IDE controllers every VM has) and on an LSI Logic SAS controller at
// bus 1 is restored with each disk where it sat.
func TestRestorePlacesIDEAndLSIDisks(t *testing.T) {
	ctx := context.Background()
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 0})
	var dss []mo.Datastore
	if err := s.pc().Retrieve(ctx, s.find(ctx, "Datastore"), []string{"name"}, &dss); err != nil {
		t.Fatal(err)
	}
	want := []vmconfig.Disk{{Key: "2000", Controller: vmconfig.IDE, Bus: 1, Unit: 0}, {Key: "2001", Controller: vmconfig.LSILogicSAS, Bus: 1, Unit: 3}}
	native, err := json.Marshal(vmconfig.Native{Disks: want})
	if err != nil {
		t.Fatal(err)
	}
	cfg := hypervisor.VMConfig{Kind: "vsphere", Name: "placed", CPUs: 1, MemoryMiB: 256, Native: native, Disks: []hypervisor.DiskInfo{
		{Key: "2000", Name: "Hard disk 1", Size: 1 << 20, Datastore: dss[0].Name}, {Key: "2001", Name: "Hard disk 2", Size: 1 << 20, Datastore: dss[0].Name}}}
	nv, err := s.connect(t, nil).CreateVM(ctx, cfg, hypervisor.NewVMOptions{Name: "placed-restored"})
	if err != nil {
		t.Fatal(err)
	}
	var vm mo.VirtualMachine
	if err := s.pc().RetrieveOne(ctx, types.ManagedObjectReference{Type: "VirtualMachine", Value: nv.Ref().ID}, []string{"config.hardware.device"}, &vm); err != nil {
		t.Fatal(err)
	}
	devices := object.VirtualDeviceList(vm.Config.Hardware.Device)
	var got []vmconfig.Disk
	for _, d := range devices.SelectByType((*types.VirtualDisk)(nil)) {
		vd := d.(*types.VirtualDisk)
		ctrl := devices.FindByKey(vd.ControllerKey)
		if ctrl == nil {
			t.Fatalf("disk %d is on controller %d, which the VM does not have", vd.Key, vd.ControllerKey)
		}
		got = append(got, vmconfig.Disk{Controller: controllerKind(ctrl), Bus: ctrl.(types.BaseVirtualController).GetVirtualController().BusNumber, Unit: *vd.UnitNumber})
	}
	for _, w := range want {
		w.Key = ""
		found := false
		for _, g := range got {
			found = found || g == w
		}
		if !found {
			t.Errorf("no restored disk on %+v; the VM has %+v", w, got)
		}
	}
}
