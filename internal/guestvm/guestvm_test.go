package guestvm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/qmp"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestGuestBootsAndWrites boots the workload guest, lets it write, then
// checks the disk image offline after a clean shutdown.
func TestGuestBootsAndWrites(t *testing.T) {
	testutil.RequireBinary(t, "qemu-system-x86_64")
	qemuImg := testutil.RequireBinary(t, "qemu-img")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	img, err := Build(ctx)
	if err != nil {
		if err == ErrNoAssets && !testutil.Strict() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	dir := t.TempDir()
	disk := filepath.Join(dir, "vda.qcow2")
	if out, err := exec.Command(qemuImg, "create", "-q", "-f", "qcow2", disk, "32M").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	vm, err := Start(ctx, img, Options{Name: "t1", Dir: dir, Mode: "write", Base: 32, Interval: 20 * time.Millisecond,
		Disks: []Disk{{ID: "vda", Path: disk, Format: "qcow2"}}, GuestAgent: true})
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Kill()
	if _, err := vm.WaitConsole(ctx, "COFFER READY"); err != nil {
		t.Fatalf("%v\n%s", err, vm.Console())
	}
	ga, err := qmp.DialGuestAgent(ctx, vm.QGAPath)
	if err != nil {
		t.Fatalf("guest agent: %v\n%s", err, vm.Console())
	}
	st, err := ga.FreezeStatus(ctx)
	ga.Close()
	if err != nil || st != "thawed" {
		t.Fatalf("fsfreeze status %q %v", st, err)
	}
	c, err := qmp.Dial(ctx, vm.TestQMP)
	if err != nil {
		t.Fatal(err)
	}
	c.Execute(ctx, "quit", nil, nil)
	<-vm.Exited()
	raw := filepath.Join(dir, "vda.raw")
	if out, err := exec.Command(qemuImg, "convert", "-O", "raw", disk, raw).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	f, _ := os.Open(raw)
	defer f.Close()
	fi, _ := f.Stat()
	rep, err := CheckDisk(f, fi.Size())
	if err != nil || rep.Base != 32 {
		t.Fatalf("check: %+v %v", rep, err)
	}
	t.Logf("guest disk: %+v", rep)
}

// TestEFIBootDiskBoots: a disk from BuildEFIBootDisk boots under OVMF
// through \EFI\BOOT\BOOTX64.EFI alone (a fresh variable store has no boot
// entry for it) and the guest mounts its root file system from it.
func TestEFIBootDiskBoots(t *testing.T) {
	testutil.RequireBinary(t, "qemu-system-x86_64")
	for _, tool := range EFIBootDiskTools {
		testutil.RequireBinary(t, tool)
	}
	fw := testutil.RequireOVMF(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	img, err := Build(ctx)
	if err != nil {
		if err == ErrNoAssets && !testutil.Strict() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	dir := t.TempDir()
	disk := filepath.Join(dir, "vda.raw")
	layout, err := BuildEFIBootDisk(ctx, img, disk, BootDiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(disk)
	if err != nil {
		t.Fatal(err)
	}
	if string(b[layout.LoaderOffset:layout.LoaderOffset+2]) != "MZ" || string(b[512:520]) != "EFI PART" {
		t.Fatalf("no GPT, or no PE image at the loader's offset %d", layout.LoaderOffset)
	}
	vm, err := Start(ctx, img, Options{Name: "efi", Dir: filepath.Join(dir, "vm"), Mode: "boot", DiskBoot: true, EFI: &fw,
		Disks: []Disk{{ID: "vda", Path: disk, Format: "raw"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Kill()
	start := time.Now()
	if _, err := vm.WaitConsole(ctx, BootMarker); err != nil {
		t.Fatalf("%v\n%s", err, vm.Console())
	}
	t.Logf("login prompt %.1f s after QEMU started", time.Since(start).Seconds())
	if !strings.Contains(vm.Console(), "root file system mounted") {
		t.Fatalf("the guest did not mount its root file system:\n%s", vm.Console())
	}
}
