package guestvm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// A boot disk boots the guest the way installed systems boot: the BIOS
// runs the MBR's code, which loads SYSLINUX from the active FAT partition
// (1), which loads the kernel and initramfs from it; the guest then mounts
// its root file system, ext4 on partition 2. Boot verification must tell a
// point whose boot sector or root file system is damaged from one that
// boots, and the test guests that QEMU boots with -kernel cannot show the
// first. Everything is built in files with mtools, syslinux's mtools
// installer and mkfs.ext4 -d: no loop device, no mount.
const (
	BootDiskMiB = 64
	bootPartMiB = 40 // FAT: kernel (~7 MiB) and initramfs (~10 MiB)
	// RootPartOffset is where the root file system's partition starts:
	// its ext4 superblock is 1024 bytes further.
	RootPartOffset = (1 + bootPartMiB) << 20
	// RootMarkerFile is the file the guest expects on its root file
	// system.
	RootMarkerFile = "coffer-root"
)

// mbrCode is syslinux's MBR boot code (syslinux-common).
const mbrCode = "/usr/lib/syslinux/mbr/mbr.bin"

// BuildBootDisk writes a raw BootDiskMiB disk at path that boots img in
// mode boot through SYSLINUX, with the guest agent when agent is set, and
// mounts /dev/vda2 as its root file system (see DiskBoot).
func BuildBootDisk(ctx context.Context, img *Image, path string, agent bool) error {
	return BuildBootDiskWith(ctx, img, path, BootDiskOptions{Agent: agent})
}

// BootDiskOptions fit a boot disk to the VM it boots in.
type BootDiskOptions struct {
	Agent bool
	// Device is the disk as the guest sees it (default /dev/vda, virtio;
	// /dev/sda on SCSI, /dev/nvme0n1 on NVMe); the root file system is
	// its partition 2.
	Device string
	// Modules are the drivers the guest loads first, in order (from the
	// asset directory's modules): a disk on a VMware controller needs
	// its driver, VMwareModules.
	Modules []string
}

// VMwareModules drive a VMware Paravirtual SCSI disk (/dev/sda) and a
// VMXNET3 adapter.
var VMwareModules = []string{"scsi_common", "scsi_mod", "sd_mod", "vmw_pvscsi", "vmxnet3"}

// BuildBootDiskWith is BuildBootDisk for a VM whose disk the guest finds
// as o says.
func BuildBootDiskWith(ctx context.Context, img *Image, path string, o BootDiskOptions) error {
	if err := checkModules(o.Modules); err != nil {
		return err
	}
	dir, err := os.MkdirTemp(filepath.Dir(path), "bootdisk-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	cfg := filepath.Join(dir, "syslinux.cfg")
	if err := os.WriteFile(cfg, []byte("SERIAL 0 115200\nDEFAULT coffer\nTIMEOUT 1\nLABEL coffer\n  KERNEL vmlinuz\n  INITRD initrd.gz\n  APPEND "+bootCmdline(o)+"\n"), 0o644); err != nil {
		return err
	}
	boot, rootImg := filepath.Join(dir, "boot.img"), filepath.Join(dir, "root.img")
	if err := buildRootImage(ctx, dir, rootImg, BootDiskMiB-1-bootPartMiB); err != nil {
		return err
	}
	if err := run(ctx, "truncate", "-s", fmt.Sprintf("%dM", BootDiskMiB), path); err != nil {
		return err
	}
	// Partition 1: FAT32 (LBA), active; partition 2: Linux.
	layout := fmt.Sprintf("label: dos\nstart=2048, size=%d, type=c, bootable\nstart=%d, type=83\n",
		bootPartMiB<<11, (1+bootPartMiB)<<11)
	if err := partition(ctx, path, layout); err != nil {
		return err
	}
	steps := [][]string{
		{"mkfs.vfat", "-C", boot, fmt.Sprint(bootPartMiB * 1024)},
		{"mcopy", "-i", boot, img.Kernel, "::vmlinuz"},
		{"mcopy", "-i", boot, img.Initrd, "::initrd.gz"},
		{"mcopy", "-i", boot, cfg, "::syslinux.cfg"},
		{"syslinux", "--install", boot},
		{"dd", "if=" + mbrCode, "of=" + path, "bs=440", "count=1", "conv=notrunc", "status=none"},
		{"dd", "if=" + boot, "of=" + path, "bs=1M", "seek=1", "conv=notrunc", "status=none"},
		{"dd", "if=" + rootImg, "of=" + path, "bs=1M", fmt.Sprintf("seek=%d", 1+bootPartMiB), "conv=notrunc", "status=none"},
	}
	for _, s := range steps {
		if err := run(ctx, s[0], s[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// checkModules refuses drivers the asset directory lacks: the guest
// would stop before its disk appears, which is not what a test means.
func checkModules(mods []string) error {
	for _, m := range mods {
		if _, err := os.Stat(filepath.Join(AssetDir(), "modules", m+".ko")); err != nil {
			return fmt.Errorf("the guest's driver %s is not in %s: run scripts/ci/install-guest.sh: %w", m, AssetDir(), ErrNoAssets)
		}
	}
	return nil
}

// bootCmdline is the kernel command line a boot disk's loader passes:
// boot mode, the root file system on partition 2 of o's device.
func bootCmdline(o BootDiskOptions) string {
	dev := o.Device
	if dev == "" {
		dev = "/dev/vda"
	}
	root := dev + "2"
	if last := dev[len(dev)-1]; last >= '0' && last <= '9' {
		root = dev + "p2" // /dev/nvme0n1p2
	}
	cmdline := KernelArgs + " coffer.mode=boot coffer.disk=" + root + " coffer.root=" + root
	if len(o.Modules) > 0 {
		cmdline += " coffer.modules=" + strings.Join(o.Modules, ",")
	}
	if o.Agent {
		cmdline += " coffer.qga=1"
	}
	return cmdline
}

// buildRootImage writes the test guest's root file system, ext4 of mib
// MiB holding RootMarkerFile, to path.
func buildRootImage(ctx context.Context, dir, path string, mib int) error {
	root, err := testRoot(dir)
	if err != nil {
		return err
	}
	return mkfsExt4(ctx, root, path, mib, "")
}

// testRoot makes the test guest's root file system's content under dir.
func testRoot(dir string) (string, error) {
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	return root, os.WriteFile(filepath.Join(root, RootMarkerFile), []byte("coffer test guest root\n"), 0o644)
}

// mkfsExt4 writes an ext4 file system of mib MiB holding the content of
// the directory root to path (mkfs.ext4 -d: no mount).
func mkfsExt4(ctx context.Context, root, path string, mib int, label string) error {
	args := []string{"-q", "-F", "-d", root}
	if label != "" {
		args = append(args, "-L", label)
	}
	return run(ctx, "mkfs.ext4", append(args, path, fmt.Sprintf("%dM", mib))...)
}

// partition writes the partition table layout (sfdisk's script format)
// into the disk image at path.
func partition(ctx context.Context, path, layout string) error {
	c := exec.CommandContext(ctx, "sfdisk", "-q", "--no-reread", "--no-tell-kernel", path)
	c.Stdin = strings.NewReader(layout)
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("sfdisk: %v: %s", err, out)
	}
	return nil
}

func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}
