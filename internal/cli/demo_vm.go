package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/coffer-backup/coffer/internal/guestvm"
)

// runVMDemo is the quick start: a real QEMU guest (software emulation)
// whose workload writes self-verifying blocks is backed up live twice by
// the demo's policy (full, then incremental), verified, restored, checked
// block by block, and booted from the restored disk, where the guest
// checks it again. then runs while the guest still runs (so that the
// console served over the results lists it as a protected VM); the guest
// stops after it.
func (a *app) runVMDemo(ctx context.Context, d demoPlace, then func() error) error {
	dir := d.dir
	step := func(format string, args ...any) { fmt.Fprintf(a.Stdout, "==> "+format+"\n", args...) }
	vmCtx := ctx // the guests live until the demo ends; its steps have ten minutes
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	step("building the demo guest (Debian cloud kernel, busybox, qemu-guest-agent, coffer's block workload)")
	img, err := guestvm.Build(ctx)
	if err != nil {
		return err
	}
	disk := filepath.Join(dir, "demo-vm.qcow2")
	if out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", disk, "256M").CombinedOutput(); err != nil {
		return fmt.Errorf("qemu-img create: %v: %s", err, out)
	}
	vmDir := filepath.Join(dir, "vm")
	step("booting VM demo-vm (TCG) with a 256 MiB qcow2 disk and a QMP monitor for coffer at %s", filepath.Join(vmDir, "qmp.sock"))
	vm, err := guestvm.Start(vmCtx, img, guestvm.Options{Name: "demo-vm", UUID: "c0ffe400-0000-4000-8000-00000000de70", Dir: vmDir,
		Mode: "write", Base: 512, Interval: 20 * time.Millisecond, GuestAgent: true,
		Disks: []guestvm.Disk{{ID: "vda", Path: disk, Format: "qcow2"}}})
	if err != nil {
		return err
	}
	defer vm.Kill()
	line, err := vm.WaitConsole(ctx, "COFFER READY")
	if err != nil {
		return err
	}
	step("guest is up and writing to its disk: %s", line)

	repoDir := d.path("repo")
	sub := func(args ...string) error { return d.run(ctx, a, args...) }
	step("creating an encrypted repository in %s", repoDir)
	if err := sub("init"); err != nil {
		return err
	}
	if vm.QMPPath != d.demoQMP() {
		return fmt.Errorf("the demo's guest listens at %s, its configuration names %s", vm.QMPPath, d.demoQMP())
	}
	step("policy demo: full backup of the running VM, quiesced through the guest agent")
	if err := sub("run", "demo"); err != nil {
		return err
	}
	if _, _, err = vm.WaitConsoleFrom(ctx, vm.Mark(), "COFFER WROTE"); err != nil {
		return err
	}
	step("the guest kept writing; policy demo again: incremental (only blocks QEMU's dirty bitmap recorded are read)")
	if err := sub("run", "demo"); err != nil {
		return err
	}
	step("both backup points, as recorded in the SQLite catalog %s", d.path("catalog.db"))
	if err := sub("catalog", "points"); err != nil {
		return err
	}
	step("verifying every chunk of the repository")
	if err := sub("verify", "--read-data"); err != nil {
		return err
	}
	restored := filepath.Join(dir, "restored.raw")
	step("restoring the latest backup point to %s", restored)
	if err := sub("restore", "latest", "--to", restored); err != nil {
		return err
	}
	f, err := os.Open(restored)
	if err != nil {
		return err
	}
	fi, _ := f.Stat()
	rep, err := guestvm.CheckDisk(f, fi.Size())
	_ = f.Close() // read only
	if err != nil {
		return fmt.Errorf("restored disk failed the check: %w", err)
	}
	step("restored disk checked block by block: %d base blocks and %d later blocks intact, no torn block", rep.Base, rep.Written)
	step("booting a second VM from the restored disk; its guest checks the disk again")
	vm2, err := guestvm.Start(ctx, img, guestvm.Options{Name: "demo-vm-restored", Dir: filepath.Join(dir, "vm2"), Mode: "check",
		Disks: []guestvm.Disk{{ID: "vda", Path: restored, Format: "raw"}}})
	if err != nil {
		return err
	}
	defer vm2.Kill()
	if line, err = vm2.WaitConsole(ctx, "COFFER CHECK OK"); err != nil {
		return err
	}
	step("restored VM says: %s", line)
	vm2.Kill() // its check is done; the demo's own guest runs on
	if err := sub("stats"); err != nil {
		return err
	}
	step("demo finished: a live VM backed up twice, restored, checked and booted")
	return then()
}
