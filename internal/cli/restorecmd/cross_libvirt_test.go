package restorecmd_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/testutil"
	"github.com/coffer-backup/coffer/internal/testutil/vclab"
)

// TestVSpherePointAsLibvirtDomain: the busybox test guest on a vCenter
// simulator's VM (its disk on VMware Paravirtual SCSI, a VMXNET3
// adapter) is backed up through the vSphere connector and restored
// through a libvirt connection (a libvirtd the test starts) as a new
// domain. The dry run reports the mapping and creates nothing; the
// restore defines a domain on the same emulated devices (vmpvscsi,
// vmxnet3), its disk equal to the vSphere VM's. The domain, backed up in
// turn, boots under the boot-verification ladder and passes its HTTP
// probe through the VMXNET3 adapter; restored back onto vSphere, it is
// on pvscsi and VMXNET3 again with the same bytes; restored into a
// directory as a QEMU VM, its launch script boots it. A Windows-typed VM's report names
// the virtio drivers it needs, and a disk on LSI Logic Parallel, which
// QEMU does not emulate, is reported unmapped.
func TestVSpherePointAsLibvirtDomain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	l := newCrossLab(t, ctx)
	l.checkDryRun()

	// The restore: a domain on the same emulated devices.
	res := l.restore(l.point["web-vs"], "--connection", "kvm", "--name", "web-kvm", "--datastore", "images", "--network", "default")
	if res.VM != "web-kvm" || res.Mapping == nil || len(res.Disks) != 1 {
		t.Fatalf("restore: %+v", res)
	}
	xml := l.virsh("dumpxml", "web-kvm")
	for _, want := range []string{"model='vmpvscsi'", "<model type='vmxnet3'/>", "bus='scsi'", "<vcpu placement='static'>1</vcpu>"} {
		if !strings.Contains(xml, want) {
			t.Fatalf("the domain lacks %s:\n%s", want, xml)
		}
	}
	flat := filepath.Join(l.e.Dir, "restored.raw")
	if out, err := exec.Command("qemu-img", "convert", "-O", "raw", filepath.Join(l.pool, "web-kvm-sda.qcow2"), flat).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if !clitest.SameFile(t, flat, l.raw) {
		t.Fatal("the domain's disk differs from the vSphere VM's")
	}

	// The ladder: the domain's point boots under local QEMU as its
	// definition says, and the guest answers through VMXNET3.
	l.e.Must("run", "kvm-p")
	probe := fmt.Sprintf("http:%d/=200", guestvm.BootProbePort)
	bv := clitest.Decode[api.BootVerification](t, l.e.Must("verify", "boot", "web-kvm", "--marker", guestvm.BootMarker, "--probe", probe, "--json"))
	if !bv.Passed || len(bv.Steps) != 6 || bv.Steps[4].Status != "passed" {
		t.Fatalf("boot verification of the restored domain: %+v", bv)
	}
	if ev := bv.Steps[0].Evidence; ev["disks"] != "sda: scsi -> pvscsi unit 0" || ev["network_adapter"] != "vmxnet3" {
		t.Fatalf("the domain did not boot on its mapped devices: %v", ev)
	}
	l.checkBackOntoVSphere(bv.PointID)
	checkAsQEMUDirectory(t, ctx, l.e, l.point["web-vs"])

	// A Windows guest, and a controller QEMU does not emulate.
	win := l.restore(l.point["win-vs"], "--connection", "kvm", "--dry-run").Mapping
	if needs := strings.Join(win.Needs, "\n"); !strings.Contains(needs, "Windows guest") || !strings.Contains(needs, "virtio-win") {
		t.Fatalf("the Windows guest's needs: %v", win.Needs)
	}
	legacy := l.restore(l.point["legacy-vs"], "--connection", "kvm", "--dry-run").Mapping
	if len(legacy.Unmapped) != 1 || legacy.Unmapped[0].Kind != "disk" || !strings.Contains(legacy.Unmapped[0].From, "LSI Logic Parallel") ||
		legacy.Unmapped[0].To != "SATA (AHCI)" {
		t.Fatalf("the LSI Logic Parallel disk: %+v", legacy.Unmapped)
	}
}

// crossLab is a vCenter simulator with three backed-up VMs (web-vs
// holding the bootable guest on pvscsi with a VMXNET3 adapter, a
// Windows-typed win-vs, legacy-vs on LSI Logic Parallel), a private
// libvirtd with a storage pool "images", and an environment whose
// configuration has both connections (vc, kvm) and a policy of the
// domain web-kvm.
type crossLab struct {
	t         *testing.T
	ctx       context.Context
	e         *clitest.Env
	lab       *clitest.VCLab
	d         *testutil.Libvirtd
	raw, pool string
	bootDisk  []byte
	point     map[string]string // VM name -> point ID
	datastore string
}

func newCrossLab(t *testing.T, ctx context.Context) *crossLab {
	testutil.RequireBinary(t, "syslinux")
	l := &crossLab{t: t, ctx: ctx, d: testutil.StartLibvirtd(t), point: map[string]string{}}
	img, err := guestvm.Build(ctx)
	if err != nil {
		if errors.Is(err, guestvm.ErrNoAssets) && !testutil.Strict() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	l.e = clitest.NewEnv(t)
	l.raw = filepath.Join(l.e.Dir, "boot.raw")
	if err := guestvm.BuildBootDiskWith(ctx, img, l.raw, guestvm.BootDiskOptions{Device: "/dev/sda", Modules: guestvm.VMwareModules}); err != nil {
		t.Fatal(err)
	}
	if l.bootDisk, err = os.ReadFile(l.raw); err != nil {
		t.Fatal(err)
	}
	l.lab = clitest.NewVCLab(t, vclab.Start(t, 1, 0))
	l.lab.CreateVMWith(ctx, vclab.VM{Name: "web-vs", Controller: "pvscsi", DiskSize: int64(len(l.bootDisk)), NIC: "vmxnet3"})
	l.lab.CreateVMWith(ctx, vclab.VM{Name: "win-vs", Controller: "lsilogic-sas", DiskSize: vclab.DiskSize, NIC: "e1000e", GuestID: "windows2019srv_64Guest"})
	l.lab.CreateVMWith(ctx, vclab.VM{Name: "legacy-vs", Controller: "lsilogic", DiskSize: vclab.DiskSize, NIC: "vmxnet3"})
	l.lab.WriteFlat(l.lab.Disk("web-vs"), l.bootDisk)
	var dss []mo.Datastore
	l.lab.Retrieve(ctx, "Datastore", []string{"name"}, &dss)
	l.datastore = dss[0].Name
	l.e.Must("init")
	for _, vm := range []string{"web-vs", "win-vs", "legacy-vs"} {
		l.lab.BackUp(l.e, vm, "")
	}
	for _, p := range clitest.SnapshotsJSON(t, l.e) {
		l.point[p.VM] = p.ID
	}
	l.pool = filepath.Join(l.d.Dir, "images")
	if err := os.MkdirAll(l.pool, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := l.d.ChownAll(l.pool); err != nil {
		t.Fatal(err)
	}
	l.virsh("pool-create-as", "images", "dir", "--target", l.pool)
	l.e.Config(l.lab.Connections(l.e) + fmt.Sprintf(`  - name: kvm
    kind: libvirt
    options: {uri: "%s", state-dir: %s}
policies:
  - {name: kvm-p, connection: kvm, select: {names: ["web-kvm"]}}
`, l.d.URI, filepath.Join(l.d.Dir, "st")))
	return l
}

func (l *crossLab) virsh(args ...string) string {
	l.t.Helper()
	out, err := exec.Command("virsh", append([]string{"-c", l.d.URI}, args...)...).CombinedOutput()
	if err != nil {
		l.t.Fatalf("virsh %v: %v %s", args, err, out)
	}
	return string(out)
}

// restore runs `coffer restore vm ARGS --json`.
func (l *crossLab) restore(args ...string) api.RestoredVM {
	l.t.Helper()
	return clitest.Decode[api.RestoredVM](l.t, l.e.Must(append([]string{"restore", "vm"}, append(args, "--json")...)...))
}

// checkDryRun: the dry run reports the mapping, and creates nothing.
func (l *crossLab) checkDryRun() {
	t := l.t
	dry := l.restore(l.point["web-vs"], "--connection", "kvm", "--name", "web-kvm", "--datastore", "images", "--network", "default", "--dry-run")
	m := dry.Mapping
	if !dry.DryRun || m == nil || m.From != "vsphere" || m.To != "libvirt" || len(m.Unmapped) != 0 {
		t.Fatalf("dry run: %+v", dry)
	}
	mapped := map[string]api.MappingItem{}
	for _, i := range m.Mapped {
		mapped[i.Kind] = i
	}
	if mapped["disk"].To != "sda on VMware Paravirtual SCSI" || mapped["nic"].To != "vmxnet3 on libvirt network default" ||
		!strings.HasPrefix(mapped["firmware"].To, "BIOS") || mapped["cpus"].To != "1" || mapped["memory"].To != "256 MiB" {
		t.Fatalf("mapped: %+v", m.Mapped)
	}
	if list := l.virsh("list", "--all", "--name"); strings.Contains(list, "web-kvm") {
		t.Fatalf("the dry run defined the domain:\n%s", list)
	}
	text := l.e.Must("restore", "vm", l.point["web-vs"], "--connection", "kvm", "--dry-run")
	if !strings.Contains(text, "a vsphere VM as a libvirt VM:") || !strings.Contains(text, "the guest needs:") {
		t.Fatalf("the dry run's text:\n%s", text)
	}
}

// checkBackOntoVSphere restores the domain's point onto vSphere: on the
// controller and adapter the guest started with, its disk the same bytes.
func (l *crossLab) checkBackOntoVSphere(point string) {
	t := l.t
	back := l.restore(point, "--connection", "vc", "--name", "web-back", "--datastore", l.datastore, "--network", "VM Network")
	if back.Mapping == nil || back.Mapping.From != "libvirt" || len(back.Mapping.Unmapped) != 0 || len(back.Disks) != 1 {
		t.Fatalf("the libvirt point onto vSphere: %+v", back)
	}
	var vms []mo.VirtualMachine
	l.lab.Retrieve(l.ctx, "VirtualMachine", []string{"name", "config.hardware.device"}, &vms)
	for _, vm := range vms {
		if vm.Name != "web-back" {
			continue
		}
		var devs []string
		for _, d := range vm.Config.Hardware.Device {
			switch d.(type) {
			case *types.ParaVirtualSCSIController:
				devs = append(devs, "pvscsi")
			case *types.VirtualVmxnet3:
				devs = append(devs, "vmxnet3")
			}
		}
		if strings.Join(devs, " ") != "pvscsi vmxnet3" {
			t.Fatalf("web-back's devices: %v", devs)
		}
	}
	if b := l.lab.ReadFlat(l.lab.Disk("web-back")); !bytes.Equal(b, l.bootDisk) {
		t.Fatal("the disk restored back onto vSphere differs")
	}
}

// checkAsQEMUDirectory restores the vSphere point into a directory as a
// QEMU VM and starts its launch script: the guest boots from its disk on
// the mapped VMware Paravirtual SCSI controller and prints its marker.
// The script asks for KVM first; this test machine's nested KVM stops
// the guest with an internal error, so the test starts it under TCG
// (the script without its KVM accelerator), as the other tests' guests.
func checkAsQEMUDirectory(t *testing.T, ctx context.Context, e *clitest.Env, point string) {
	t.Helper()
	dir := filepath.Join(e.Dir, "web-qemu")
	res := clitest.Decode[api.RestoredVM](t, e.Must("restore", "vm", point, "--to", dir, "--name", "web-qemu", "--format", "raw", "--json"))
	if res.Mapping == nil || res.Mapping.To != "qemu" || len(res.Disks) != 1 {
		t.Fatalf("the vSphere point as a QEMU VM: %+v", res)
	}
	script, err := os.ReadFile(res.LaunchScript)
	if err != nil || !strings.Contains(string(script), "'pvscsi,id=ctrl0'") || !strings.Contains(string(script), "'vmxnet3,") ||
		!strings.Contains(string(script), "'-accel' 'kvm' '-accel' 'tcg'") {
		t.Fatalf("the launch script: %v\n%s", err, script)
	}
	tcg := filepath.Join(dir, "launch-tcg.sh")
	if err := os.WriteFile(tcg, []byte(strings.Replace(string(script), "'-accel' 'kvm' ", "", 1)), 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(ctx, "sh", tcg).CombinedOutput(); err != nil {
		t.Fatalf("the launch script: %v %s", err, out)
	}
	t.Cleanup(func() { _ = qemu.Quit(context.Background(), res.QMPSocket) })
	clitest.WaitFile(ctx, t, res.Console, 0, guestvm.BootMarker)
}
