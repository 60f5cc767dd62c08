package repocmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/cli/repocmd"
	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/testutil"
	"github.com/coffer-backup/coffer/internal/testutil/vclab"
)

// TestVerifyBootVSphere: a vCenter simulator's VM whose disk holds a
// bootable guest (SYSLINUX, kernel, ext4 root file system on /dev/sda2,
// for a VMware Paravirtual SCSI controller and a VMXNET3 adapter) is
// backed up through the vSphere connector, and `coffer verify boot`
// boots the point under local QEMU from its recorded configuration: the
// same controller and adapter, so the guest's own drivers find its disk
// and network. It passes the ladder with an HTTP probe through the
// VMXNET3 adapter. A point of the same VM whose disk was zeroed fails at
// step 3 with a screenshot; a VM on an LSI Logic Parallel controller,
// which QEMU does not emulate, is "cannot verify locally", exit 2, and no
// QEMU starts. A VM whose firmware is EFI, its disk a GPT one that boots
// through \EFI\BOOT\BOOTX64.EFI, passes under OVMF from an NVMe
// controller, and is "cannot verify locally" from a pvscsi one (OVMF has
// no driver for it). `coffer snapshots` shows them all in the BOOT column.
func TestVerifyBootVSphere(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, tool := range append([]string{"qemu-system-x86_64", "syslinux"}, guestvm.EFIBootDiskTools...) {
		testutil.RequireBinary(t, tool)
	}
	testutil.RequireOVMF(t)
	img, err := guestvm.Build(ctx)
	if err != nil {
		if errors.Is(err, guestvm.ErrNoAssets) && !testutil.Strict() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	e := clitest.NewEnv(t)
	raw := filepath.Join(e.Dir, "boot.raw")
	err = guestvm.BuildBootDiskWith(ctx, img, raw, guestvm.BootDiskOptions{Device: "/dev/sda", Modules: guestvm.VMwareModules})
	if err != nil {
		if errors.Is(err, guestvm.ErrNoAssets) && !testutil.Strict() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	bootDisk, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	efiRaw := filepath.Join(e.Dir, "efi.raw")
	if _, err := guestvm.BuildEFIBootDisk(ctx, img, efiRaw, guestvm.BootDiskOptions{Device: "/dev/nvme0n1", Modules: []string{"vmxnet3"}}); err != nil {
		t.Fatal(err)
	}
	efiDisk, err := os.ReadFile(efiRaw)
	if err != nil {
		t.Fatal(err)
	}

	lab := clitest.NewVCLab(t, vclab.Start(t, 1, 0))
	lab.CreateVMWith(ctx, vclab.VM{Name: "web-vs", Controller: "pvscsi", DiskSize: int64(len(bootDisk)), NIC: "vmxnet3"})
	lab.CreateVMWith(ctx, vclab.VM{Name: "legacy-vs", Controller: "lsilogic", DiskSize: int64(len(bootDisk)), NIC: "vmxnet3"})
	lab.CreateVMWith(ctx, vclab.VM{Name: "efi-vs", Controller: "nvme", DiskSize: int64(len(efiDisk)), NIC: "vmxnet3", Firmware: "efi"})
	lab.CreateVMWith(ctx, vclab.VM{Name: "efi-pvscsi-vs", Controller: "pvscsi", DiskSize: int64(len(efiDisk)), Firmware: "efi"})
	web := lab.Disk("web-vs")
	lab.WriteFlat(web, bootDisk)
	lab.WriteFlat(lab.Disk("efi-vs"), efiDisk)
	lab.WriteFlat(lab.Disk("legacy-vs"), bootDisk)
	e.Must("init")
	lab.BackUp(e, "web-vs", "")

	probe := fmt.Sprintf("http:%d/=200", guestvm.BootProbePort)
	out := e.Must("verify", "boot", "web-vs", "--marker", guestvm.BootMarker, "--probe", probe, "--json")
	var good api.BootVerification
	if err := json.Unmarshal([]byte(out), &good); err != nil || !good.Passed || len(good.Steps) != 6 || good.VM != "web-vs" {
		t.Fatalf("verify boot of the good point: %v\n%s", err, out)
	}
	start, agent := good.Steps[0], good.Steps[3]
	if !strings.Contains(start.Evidence["disks"], "pvscsi 0:0 -> pvscsi") || start.Evidence["network_adapter"] != "vmxnet3" {
		t.Fatalf("the VM did not start on its own controller and adapter: %+v", start.Evidence)
	}
	if agent.Status != "skipped" || !strings.Contains(agent.Detail, "VMware Tools") {
		t.Fatalf("step 4 of a vSphere guest: %+v", agent)
	}
	if good.Steps[4].Status != "passed" {
		t.Fatalf("the HTTP probe through the VMXNET3 adapter: %+v", good.Steps[4])
	}

	// EFI firmware: OVMF, which finds the loader at the removable-media
	// path (VMware's boot entries are not in the backup).
	lab.BackUp(e, "efi-vs", "")
	out = e.Must("verify", "boot", "efi-vs", "--marker", guestvm.BootMarker, "--probe", probe, "--json")
	var efi api.BootVerification
	if err := json.Unmarshal([]byte(out), &efi); err != nil || !efi.Passed || len(efi.Steps) != 6 {
		t.Fatalf("verify boot of the EFI VM's point: %v\n%s", err, out)
	}
	if fw := efi.Steps[0].Evidence["firmware"]; !strings.HasPrefix(fw, "EFI (") || efi.Steps[4].Status != "passed" ||
		!strings.Contains(efi.Steps[0].Evidence["disks"], "nvme 0:0 -> nvme") {
		t.Fatalf("the EFI VM did not boot under OVMF from NVMe with its probe: %+v %+v", efi.Steps[0].Evidence, efi.Steps[4])
	}
	lab.BackUp(e, "efi-pvscsi-vs", "")
	code, stdout, stderr := e.Run("verify", "boot", "efi-pvscsi-vs", "--marker", guestvm.BootMarker, "--json")
	var efiPV api.BootVerification
	if err := json.Unmarshal([]byte(stdout), &efiPV); err != nil || code != command.ExitUsage || efiPV.Passed ||
		!strings.Contains(efiPV.CannotVerify, "OVMF has no driver") {
		t.Fatalf("verify boot of an EFI VM booting from pvscsi: exit %d %v\n%s\n%s", code, err, stdout, stderr)
	}

	// The same VM with its disk zeroed: the BIOS finds nothing to boot.
	lab.WriteFlat(web, make([]byte, web.Size))
	lab.BackUp(e, "web-vs", "")
	shot := filepath.Join(e.Dir, "zeroed.png")
	code, stdout, stderr = e.Run("verify", "boot", "web-vs", "--marker", guestvm.BootMarker, "--timeout", "45s", "--screenshot", shot)
	if code != command.ExitIntegrity || !strings.Contains(stderr, "step 3 (console-marker)") {
		t.Fatalf("verify boot of the zeroed point: exit %d\n%s\n%s", code, stdout, stderr)
	}
	b, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("no screenshot of the zeroed point: %v", err)
	}
	if _, err := png.Decode(bytes.NewReader(b)); err != nil {
		t.Fatalf("the zeroed point's screenshot: %v", err)
	}

	// A VM on a controller QEMU does not emulate: no false "does not boot".
	lab.BackUp(e, "legacy-vs", "")
	code, stdout, stderr = e.Run("verify", "boot", "legacy-vs", "--marker", guestvm.BootMarker, "--json")
	var legacy api.BootVerification
	if err := json.Unmarshal([]byte(stdout), &legacy); err != nil || code != command.ExitUsage || legacy.Passed ||
		!strings.Contains(legacy.CannotVerify, "LSI Logic Parallel") || legacy.FailedStep != 1 || len(legacy.ScreenshotPNG) != 0 {
		t.Fatalf("verify boot of an LSI Logic Parallel VM: exit %d %v\n%s\n%s", code, err, stdout, stderr)
	}
	if _, stdout, _ = e.Run("verify", "boot", "legacy-vs"); !strings.Contains(stdout, "CANNOT VERIFY LOCALLY: disk ") {
		t.Fatalf("the verdict of an LSI Logic Parallel VM:\n%s", stdout)
	}

	var points []api.BackupPoint
	if err := json.Unmarshal([]byte(e.Must("snapshots", "--json")), &points); err != nil || len(points) != 5 {
		t.Fatalf("snapshots: %+v %v", points, err)
	}
	boot := map[string]string{}
	for _, p := range points {
		if p.BootVerification == nil {
			t.Fatalf("point %s of %s has no boot verification", p.ID, p.VM)
		}
		boot[p.ID] = repocmd.BootColumn(p.BootVerification)
	}
	if boot[good.PointID] != "ok" || boot[efi.PointID] != "ok" || boot[legacy.PointID] != "unverifiable" ||
		boot[efiPV.PointID] != "unverifiable" || len(boot) != 5 {
		t.Fatalf("BOOT column: %v", boot)
	}
	table := e.Must("snapshots")
	for _, want := range []string{" ok ", "failed@3", "unverifiable"} {
		if !strings.Contains(table, want) {
			t.Fatalf("snapshots table lacks %q:\n%s", want, table)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(e.Dir, "state", "bootverify", "*")); len(left) != 0 {
		t.Fatalf("left in the state directory: %v", left)
	}
}
