// Command fleetguest is scripts/fleet-demo.sh's guest: the demo's small
// QEMU guest (internal/guestvm, the same as `coffer demo`'s: a Debian
// cloud kernel, busybox and coffer's block workload, under TCG) booted on
// the host the script runs it on, and the check of a disk restored from
// its backup.
//
//	fleetguest image                           build the guest's initramfs (once, cached)
//	fleetguest boot DIR NAME UUID              boot a guest with a 32 MiB qcow2 disk in DIR, until SIGTERM
//	fleetguest check DISK                      check a restored raw disk block by block
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/coffer-backup/coffer/internal/guestvm"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case len(os.Args) == 2 && os.Args[1] == "image":
		_, err = guestvm.Build(ctx)
	case len(os.Args) == 5 && os.Args[1] == "boot":
		err = boot(ctx, os.Args[2], os.Args[3], os.Args[4])
	case len(os.Args) == 3 && os.Args[1] == "check":
		err = check(os.Args[2])
	default:
		err = fmt.Errorf("usage: fleetguest image | boot DIR NAME UUID | check DISK")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetguest:", err)
		os.Exit(1)
	}
}

// boot runs the guest until ctx ends (the script's SIGTERM), printing
// "ready QMP-SOCKET" once its workload writes.
func boot(ctx context.Context, dir, name, uuid string) error {
	img, err := guestvm.Build(ctx)
	if err != nil {
		return err
	}
	disk := filepath.Join(dir, name+".qcow2")
	if out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", disk, "32M").CombinedOutput(); err != nil {
		return fmt.Errorf("qemu-img create: %v: %s", err, out)
	}
	vm, err := guestvm.Start(ctx, img, guestvm.Options{Name: name, UUID: uuid, Dir: filepath.Join(dir, "vm"),
		Mode: "write", Base: 64, Interval: 50 * time.Millisecond, Disks: []guestvm.Disk{{ID: "vda", Path: disk, Format: "qcow2"}}})
	if err != nil {
		return err
	}
	defer vm.Kill()
	if _, err := vm.WaitConsole(ctx, "COFFER READY"); err != nil {
		return fmt.Errorf("%v\n%s", err, vm.Console())
	}
	fmt.Println("ready", vm.QMPPath)
	select {
	case <-ctx.Done():
		return nil
	case <-vm.Exited():
		return fmt.Errorf("the guest's QEMU exited:\n%s", vm.Console())
	}
}

// check reads a restored disk: every block the guest wrote must be
// whole (guestvm.CheckDisk).
func check(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }() // read only
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	rep, err := guestvm.CheckDisk(f, fi.Size())
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	fmt.Printf("%d base blocks and %d later blocks intact, no torn block\n", rep.Base, rep.Written)
	return nil
}
