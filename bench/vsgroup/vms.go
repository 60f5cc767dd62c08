package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/bench/benchutil"
)

// createVMs creates n powered-on VMs on the simulator's one datastore,
// each with one flat disk of 4x data holding data random bytes, CBT on;
// it returns the datastore's name and local directory.
func createVMs(ctx context.Context, sdk *url.URL, n int, data int64) (string, string) {
	u := *sdk
	u.User = url.UserPassword(user, password)
	c, err := govmomi.NewClient(ctx, &u, true)
	benchutil.Check(err)
	fd := find.NewFinder(c.Client, true)
	dc, err := fd.DefaultDatacenter(ctx)
	benchutil.Check(err)
	fd.SetDatacenter(dc)
	folders, err := dc.Folders(ctx)
	benchutil.Check(err)
	pool, err := fd.DefaultResourcePool(ctx)
	benchutil.Check(err)
	ds, err := fd.DefaultDatastore(ctx)
	benchutil.Check(err)
	var m mo.Datastore
	benchutil.Check(ds.Properties(ctx, ds.Reference(), []string{"summary"}, &m))
	dsURL, err := url.Parse(m.Summary.Url)
	benchutil.Check(err)
	buf := make([]byte, data)
	for i := range n {
		name := fmt.Sprintf("vm-%03d", i)
		spec := types.VirtualMachineConfigSpec{Name: name, GuestId: string(types.VirtualMachineGuestOsIdentifierOtherGuest),
			NumCPUs: 1, MemoryMB: 256, ChangeTrackingEnabled: types.NewBool(true),
			Files: &types.VirtualMachineFileInfo{VmPathName: "[" + ds.Name() + "]"}}
		var devs object.VirtualDeviceList
		scsi, _ := devs.CreateSCSIController("pvscsi")
		disk := devs.CreateDisk(scsi.(types.BaseVirtualController), types.ManagedObjectReference{},
			fmt.Sprintf("[%s] %s/disk.vmdk", ds.Name(), name))
		disk.CapacityInKB = 4 * data / 1024
		devs = append(devs, scsi, disk)
		spec.DeviceChange, _ = devs.ConfigSpec(types.VirtualDeviceConfigSpecOperationAdd)
		spec.DeviceChange[1].GetVirtualDeviceConfigSpec().FileOperation = types.VirtualDeviceConfigSpecFileOperationCreate
		task, err := folders.VmFolder.CreateVM(ctx, spec, pool, nil)
		benchutil.Check(err)
		info, err := task.WaitForResult(ctx)
		benchutil.Check(err)
		vm := object.NewVirtualMachine(c.Client, info.Result.(types.ManagedObjectReference))
		task, err = vm.PowerOn(ctx)
		benchutil.Check(err)
		benchutil.Check(task.Wait(ctx))
		// A real flat extent is as large as the disk; vcsim leaves it
		// empty. Each VM's data differs.
		flat := filepath.Join(dsURL.Path, name, "disk-flat.vmdk")
		benchutil.Check(os.Truncate(flat, 4*data))
		rand.Read(buf)
		f, err := os.OpenFile(flat, os.O_WRONLY, 0)
		benchutil.Check(err)
		_, err = f.WriteAt(buf, 0)
		benchutil.Check(err)
		benchutil.Check(f.Close())
	}
	return ds.Name(), dsURL.Path
}
