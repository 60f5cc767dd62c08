package restorecmd_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/ovmf"
	"github.com/coffer-backup/coffer/internal/testutil"
	"github.com/coffer-backup/coffer/internal/testutil/vclab"
)

// TestQEMUPointAsVSphereVM: a QEMU guest with EFI firmware, two raw
// disks on virtio-blk holding data, a virtio-net and an e1000 adapter, and
// 384 MiB of memory is backed up and restored through a vCenter
// simulator's connection as a new VM. Read back through govmomi, the VM
// has the mapped hardware: EFI, its CPUs and memory, both disks of their
// sizes on a VMware Paravirtual SCSI controller, a VMXNET3 and an E1000
// adapter on the network named, and its disks' flat files equal the
// guest's. The kernel the guest booted directly, and its EFI variable
// store, are reported unmapped.
func TestQEMUPointAsVSphereVM(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	testutil.RequireBinary(t, "qemu-system-x86_64")
	fw, ok := ovmf.Find()
	if !ok {
		testutil.RequireOVMF(t)
	}
	img, err := guestvm.Build(ctx)
	if err != nil {
		if errors.Is(err, guestvm.ErrNoAssets) && !testutil.Strict() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	e := clitest.NewEnv(t)
	sizes := map[string]int{"vda": 24 << 20, "vdb": 8 << 20}
	data := map[string][]byte{}
	var disks []guestvm.Disk
	for _, id := range []string{"vda", "vdb"} {
		b := make([]byte, sizes[id])
		rand.Read(b[:sizes[id]/4]) // a quarter written, the rest a hole
		path := filepath.Join(e.Dir, id+".raw")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		data[id] = b
		disks = append(disks, guestvm.Disk{ID: id, Path: path, Format: "raw"})
	}
	vm, err := guestvm.Start(ctx, img, guestvm.Options{Name: "web-1", Dir: filepath.Join(e.Dir, "vm"), Mode: "boot", MemoryMiB: 384,
		EFI: &fw, Disks: disks, Extra: []string{"-netdev", "user,id=n0", "-device", "virtio-net-pci,netdev=n0,id=net0",
			"-netdev", "user,id=n1", "-device", "e1000,netdev=n1,id=net1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	e.Must("init")
	e.Must("backup", "vm", vm.QMPPath)
	vm.Kill()

	lab := clitest.NewVCLab(t, vclab.Start(t, 1, 0))
	e.Config(lab.Connections(e))
	var dss []mo.Datastore
	lab.Retrieve(ctx, "Datastore", []string{"name"}, &dss)
	res := clitest.Decode[api.RestoredVM](t, e.Must("restore", "vm", "latest", "--connection", "vc", "--name", "web-1-vs",
		"--datastore", dss[0].Name, "--network", "VM Network", "--json"))
	m := res.Mapping
	if res.VM != "web-1-vs" || m == nil || m.From != "qemu" || m.To != "vsphere" || len(res.Disks) != 2 {
		t.Fatalf("restore: %+v", res)
	}
	// The kernel outside the disks, and the EFI variable store QEMU
	// backs up as a drive (vSphere keeps its own NVRAM).
	if len(m.Unmapped) != 2 || m.Unmapped[0].Kind != "boot" || !strings.Contains(m.Unmapped[0].From, "a kernel booted directly") ||
		m.Unmapped[1].Kind != "firmware" || m.Unmapped[1].Name != "pflash1" {
		t.Fatalf("unmapped: %+v", m.Unmapped)
	}
	if needs := strings.Join(m.Needs, "\n"); !strings.Contains(needs, "vmw_pvscsi") {
		t.Fatalf("needs: %v", m.Needs)
	}

	var vms []mo.VirtualMachine
	lab.Retrieve(ctx, "VirtualMachine", []string{"name", "config"}, &vms)
	var got *mo.VirtualMachine
	for i := range vms {
		if vms[i].Name == "web-1-vs" {
			got = &vms[i]
		}
	}
	if got == nil {
		t.Fatal("no VM web-1-vs on the simulator")
	}
	hw := got.Config.Hardware
	if got.Config.Firmware != "efi" || hw.NumCPU != 1 || hw.MemoryMB != 384 {
		t.Fatalf("firmware %s, %d CPUs, %d MiB", got.Config.Firmware, hw.NumCPU, hw.MemoryMB)
	}
	checkDevices(t, hw.Device, []int64{int64(sizes["vda"]), int64(sizes["vdb"])})
	flats := lab.Disks("web-1-vs")
	if len(flats) != 2 {
		t.Fatalf("%d disks", len(flats))
	}
	for i, id := range []string{"vda", "vdb"} {
		if b := lab.ReadFlat(flats[i]); !bytes.Equal(b, data[id]) {
			t.Fatalf("disk %s: %d bytes restored, differing from the guest's %d", id, len(b), len(data[id]))
		}
	}
}

// checkDevices checks a restored VM's disks (their sizes, on VMware
// Paravirtual SCSI) and adapters (VMXNET3 then E1000 on VM Network).
func checkDevices(t *testing.T, devs []types.BaseVirtualDevice, sizes []int64) {
	t.Helper()
	pvscsi := map[int32]bool{}
	var nics []string
	var got []int64
	for _, d := range devs {
		switch x := d.(type) {
		case *types.ParaVirtualSCSIController:
			pvscsi[x.Key] = true
		case *types.VirtualVmxnet3:
			nics = append(nics, "vmxnet3 "+x.DeviceInfo.GetDescription().Summary)
		case *types.VirtualE1000:
			nics = append(nics, "e1000 "+x.DeviceInfo.GetDescription().Summary)
		}
	}
	for _, d := range devs {
		if x, ok := d.(*types.VirtualDisk); ok {
			if !pvscsi[x.ControllerKey] {
				t.Fatalf("disk %d is not on a VMware Paravirtual SCSI controller", x.Key)
			}
			got = append(got, x.CapacityInBytes)
		}
	}
	if len(got) != len(sizes) || got[0] != sizes[0] || got[1] != sizes[1] {
		t.Fatalf("disk sizes %v, want %v", got, sizes)
	}
	if len(nics) != 2 || !strings.HasPrefix(nics[0], "vmxnet3 ") || !strings.HasPrefix(nics[1], "e1000 ") ||
		!strings.Contains(nics[0], "VM Network") {
		t.Fatalf("adapters: %v", nics)
	}
}
