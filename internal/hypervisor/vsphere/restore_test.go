package vsphere

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/restore"
)

// TestRestoreToNewVM backs up a VM with two disks and a network adapter,
// restores the point to a new VM built from the recorded configuration,
// and reads the new VM's disks back over HTTPS: byte-identical. Names in
// use are refused, and a running VM's disks are never written.
func TestRestoreToNewVM(t *testing.T) {
	ctx := context.Background()
	s := startSim(t, simOptions{Hosts: 2, Datastores: 2, VMs: 1, Disks: 2, DiskSize: 2 << 20})
	sh := newCBTShim(t, s)
	c := sh.connect(t, nil)
	ref := s.vms[0]
	vmo := object.NewVirtualMachine(s.client, ref)
	backing := &types.VirtualEthernetCardNetworkBackingInfo{VirtualDeviceDeviceBackingInfo: types.VirtualDeviceDeviceBackingInfo{DeviceName: "VM Network"}}
	card, err := object.EthernetCardTypes().CreateEthernetCard("vmxnet3", backing)
	if err != nil {
		t.Fatal(err)
	}
	if err := vmo.AddDevice(ctx, card); err != nil {
		t.Fatal(err)
	}
	sh.write(t, ref, 0, 0, bytes.Repeat([]byte("first disk "), 20000))
	sh.write(t, ref, 0, (2<<20)-4096, bytes.Repeat([]byte{0xee}, 4096))
	sh.write(t, ref, 1, 1<<20, bytes.Repeat([]byte("second"), 5000))
	want := [][]byte{sh.read(t, ref, 0), sh.read(t, ref, 1)}

	r := newRepo(t)
	point := runBackup(t, r, c, hypervisor.VMRef{ID: ref.Value, Name: "vm-0000"})
	var cfg hypervisor.VMConfig
	if err := json.Unmarshal(point.VMConfig, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Disks) != 2 || len(cfg.NICs) != 1 || cfg.CPUs != 2 || cfg.MemoryMiB != 512 {
		t.Fatalf("recorded config: %+v", cfg)
	}

	if _, err := c.CreateVM(ctx, cfg, hypervisor.NewVMOptions{Name: "vm-0000"}); !errors.Is(err, ErrVMExists) {
		t.Fatalf("restore over the original's name: %v", err)
	}
	nv, err := c.CreateVM(ctx, cfg, hypervisor.NewVMOptions{Name: "vm-0000-restored"})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range point.Disks {
		src, err := restore.OpenDisk(ctx, r, d, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := nv.WriteDisk(ctx, d.Key, src); err != nil {
			t.Fatal(err)
		}
	}

	// The new VM as vSphere sees it.
	var vm mo.VirtualMachine
	newRef := types.ManagedObjectReference{Type: "VirtualMachine", Value: nv.Ref().ID}
	if err := s.pc().RetrieveOne(ctx, newRef, []string{"config", "runtime.powerState"}, &vm); err != nil {
		t.Fatal(err)
	}
	if vm.Config.Hardware.NumCPU != 2 || vm.Config.Hardware.MemoryMB != 512 || vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOff {
		t.Fatalf("new VM: %d CPUs, %d MiB, %s", vm.Config.Hardware.NumCPU, vm.Config.Hardware.MemoryMB, vm.Runtime.PowerState)
	}
	var disks []*types.VirtualDisk
	nics := 0
	for _, d := range vm.Config.Hardware.Device {
		switch x := d.(type) {
		case *types.VirtualDisk:
			disks = append(disks, x)
		case types.BaseVirtualEthernetCard:
			if b, ok := x.GetVirtualEthernetCard().Backing.(*types.VirtualEthernetCardNetworkBackingInfo); ok && b.DeviceName == "VM Network" {
				nics++
			}
		}
	}
	if len(disks) != 2 || nics != 1 {
		t.Fatalf("new VM: %d disks, %d adapters on VM Network", len(disks), nics)
	}
	// Its bytes, read back through the HTTPS datastore transport.
	for i, d := range point.Disks {
		loc := nv.(*newVM).disks[d.Key]
		rd, err := c.transport.OpenDisk(ctx, loc)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, loc.Size)
		if _, err := rd.ReadAt(got, 0); err != nil {
			t.Fatal(err)
		}
		rd.Close()
		if diskBytes(disks[i]) != int64(len(want[i])) || !bytes.Equal(got, want[i]) {
			t.Fatalf("disk %d of the restored VM differs from the original at backup time", i)
		}
	}

	if err := nv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	src, _ := restore.OpenDisk(ctx, r, point.Disks[0], 0)
	if err := nv.WriteDisk(ctx, point.Disks[0].Key, src); err == nil {
		t.Fatal("wrote the disk of a running VM")
	}
	if err := nv.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	vms, err := c.Inventory(ctx)
	if err != nil || len(vms) != 1 {
		t.Fatalf("after abort: %d VMs, %v", len(vms), err)
	}
}

// TestRestoreOntoOriginal writes a backup back onto the original VM's disk
// after the disk was overwritten: refused while the VM runs, done once it
// is powered off; the disk then holds the backed-up bytes again, and an
// abort never deletes the original VM.
func TestRestoreOntoOriginal(t *testing.T) {
	ctx := context.Background()
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 1, DiskSize: 2 << 20})
	sh := newCBTShim(t, s)
	c := sh.connect(t, nil)
	ref := s.vms[0]
	sh.write(t, ref, 0, 4096, bytes.Repeat([]byte("good data "), 10000))
	want := sh.read(t, ref, 0)
	r := newRepo(t)
	point := runBackup(t, r, c, hypervisor.VMRef{ID: ref.Value, Name: "vm-0000"})
	var cfg hypervisor.VMConfig
	if err := json.Unmarshal(point.VMConfig, &cfg); err != nil {
		t.Fatal(err)
	}
	sh.write(t, ref, 0, 0, bytes.Repeat([]byte{0xba}, 512<<10)) // ransomware, say

	if _, err := c.CreateVM(ctx, cfg, hypervisor.NewVMOptions{ReplaceExisting: true}); err == nil || !strings.Contains(err.Error(), "running") {
		t.Fatalf("restore onto a running VM: %v", err)
	}
	vmo := object.NewVirtualMachine(s.client, ref)
	task, err := vmo.PowerOff(ctx)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	nv, err := c.CreateVM(ctx, cfg, hypervisor.NewVMOptions{ReplaceExisting: true})
	if err != nil {
		t.Fatal(err)
	}
	if nv.Ref().ID != ref.Value {
		t.Fatalf("restore target %v, want the original %s", nv.Ref(), ref.Value)
	}
	src, err := restore.OpenDisk(ctx, r, point.Disks[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := nv.WriteDisk(ctx, point.Disks[0].Key, src); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sh.read(t, ref, 0), want) {
		t.Fatal("the original disk does not hold the backed-up bytes")
	}
	if err := nv.Abort(ctx); err == nil {
		t.Fatal("abort of a restore onto the original reported nothing")
	}
	if vms, _ := c.Inventory(ctx); len(vms) != 1 {
		t.Fatal("abort deleted the original VM")
	}
}
