package guestvm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// An EFI boot disk boots the guest the way installed UEFI systems boot:
// GPT, an EFI System Partition (FAT32, partition 1) holding one EFI
// program at the removable-media path \EFI\BOOT\BOOTX64.EFI, which the
// firmware (OVMF) finds without boot entries in its variable store, as
// a vSphere point's guest must (VMware's entries are not in the backup);
// the guest then mounts its ext4 root file system on partition 2, at
// RootPartOffset as on the BIOS boot disk.
//
// The EFI program is a unified kernel image: systemd-boot's EFI stub
// (Debian's systemd-boot-efi) with the kernel, the initramfs and the
// command line added as PE sections by objcopy. It is one file, with no
// loader configuration and no modules to assemble, unlike a GRUB
// standalone image; the Debian kernel's own EFI stub alone would boot
// without an initramfs or a command line, since the firmware passes none
// through the removable-media path.
const (
	efiStub        = "/usr/lib/systemd/boot/efi/linuxx64.efi.stub"
	efiLoader      = "EFI/BOOT/BOOTX64.EFI"
	efiRootMiB     = BootDiskMiB - 2 - bootPartMiB // the test guest's: its disk is BootDiskMiB
	peAlignment    = 1 << 20                       // between the UKI's added sections (the PE's 4 KiB would do)
	stubCmdlineVMA = 0x30000                       // past the stub's own sections (they end below 0x20000)
	stubKernelVMA  = 0x2000000
)

// EFIBootDisk says where the disk's EFI program lies, so that a test can
// damage it the way a bad update or a disk error would.
type EFIBootDisk struct {
	// LoaderOffset and LoaderSize are the disk's bytes holding
	// \EFI\BOOT\BOOTX64.EFI (contiguous: it is the only file written to
	// an empty FAT).
	LoaderOffset, LoaderSize int64
}

// EFIBootDiskTools are the programs BuildEFIBootDisk runs (a test
// requires them); the stub is a file of systemd-boot-efi.
var EFIBootDiskTools = []string{"objcopy", "mkfs.vfat", "mmd", "mcopy", "mkfs.ext4", "sfdisk"}

// BuildEFIBootDisk writes a raw BootDiskMiB disk at path that boots img
// in mode boot under UEFI and mounts partition 2 of o.Device as its root
// file system.
func BuildEFIBootDisk(ctx context.Context, img *Image, path string, o BootDiskOptions) (*EFIBootDisk, error) {
	if err := checkModules(o.Modules); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(filepath.Dir(path), "efidisk-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	root, err := testRoot(dir)
	if err != nil {
		return nil, err
	}
	return BuildEFISystemDisk(ctx, path, EFISystem{Kernel: img.Kernel, Initrd: img.Initrd, Cmdline: bootCmdline(o),
		RootDir: root, RootMiB: efiRootMiB})
}

// EFISystem is what an installed system's UEFI disk holds: the kernel,
// initramfs and command line its loader starts, and the content of its
// root file system (a directory: a Debian system built by mmdebstrap,
// say).
type EFISystem struct {
	Kernel, Initrd, Cmdline string
	RootDir                 string
	RootLabel               string // the root file system's label (root=LABEL=...), optional
	RootMiB                 int
}

// BuildEFISystemDisk writes a raw disk at path that boots s under UEFI:
// GPT, the EFI System Partition (1) at 1 MiB, sized to the loader, the
// ext4 root file system (2) right after it, and the backup GPT's MiB.
func BuildEFISystemDisk(ctx context.Context, path string, s EFISystem) (*EFIBootDisk, error) {
	if _, err := os.Stat(efiStub); err != nil {
		return nil, fmt.Errorf("the EFI boot disk's loader is systemd-boot's stub %s: install systemd-boot-efi (scripts/ci/install-files.sh): %w", efiStub, err)
	}
	dir, err := os.MkdirTemp(filepath.Dir(path), "efisystem-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	uki := filepath.Join(dir, "BOOTX64.EFI")
	if err := buildUKI(ctx, dir, s, uki); err != nil {
		return nil, err
	}
	fi, err := os.Stat(uki)
	if err != nil {
		return nil, err
	}
	esp, rootImg := filepath.Join(dir, "esp.img"), filepath.Join(dir, "root.img")
	// Room for the loader and FAT32's own structures; at least the BIOS
	// boot disk's partition, so that both disks put their root file
	// system at RootPartOffset.
	espMiB := max(bootPartMiB, int(fi.Size()>>20)+8)
	if err := mkfsExt4(ctx, s.RootDir, rootImg, s.RootMiB, s.RootLabel); err != nil {
		return nil, err
	}
	if err := run(ctx, "truncate", "-s", fmt.Sprintf("%dM", 1+espMiB+s.RootMiB+1), path); err != nil {
		return nil, err
	}
	// Partition 1: the EFI System Partition; 2: Linux, before the backup
	// GPT in the disk's last sectors.
	layout := fmt.Sprintf("label: gpt\nstart=2048, size=%d, type=U\nstart=%d, size=%d, type=L\n",
		espMiB<<11, (1+espMiB)<<11, s.RootMiB<<11)
	if err := partition(ctx, path, layout); err != nil {
		return nil, err
	}
	for _, step := range [][]string{
		{"mkfs.vfat", "-F", "32", "-C", esp, fmt.Sprint(espMiB * 1024)},
		{"mmd", "-i", esp, "::EFI", "::EFI/BOOT"},
		{"mcopy", "-i", esp, uki, "::" + efiLoader},
		{"dd", "if=" + esp, "of=" + path, "bs=1M", "seek=1", "conv=notrunc,sparse", "status=none"},
		{"dd", "if=" + rootImg, "of=" + path, "bs=1M", fmt.Sprintf("seek=%d", 1+espMiB), "conv=notrunc,sparse", "status=none"},
	} {
		if err := run(ctx, step[0], step[1:]...); err != nil {
			return nil, err
		}
	}
	off, size, err := locate(esp, uki)
	if err != nil {
		return nil, err
	}
	return &EFIBootDisk{LoaderOffset: 1<<20 + off, LoaderSize: size}, nil
}

// buildUKI assembles systemd-boot's stub, the kernel command line, the
// kernel and the initramfs into one EFI program at out. The stub finds
// each by its section name; the sections go past the stub's own, in
// order, each at an address the next does not overlap.
func buildUKI(ctx context.Context, dir string, s EFISystem, out string) error {
	cl := filepath.Join(dir, "cmdline")
	if err := os.WriteFile(cl, []byte(s.Cmdline), 0o644); err != nil {
		return err
	}
	kernel, err := os.Stat(s.Kernel)
	if err != nil {
		return err
	}
	initrdVMA := stubKernelVMA + (kernel.Size()+peAlignment-1)/peAlignment*peAlignment
	return run(ctx, "objcopy",
		"--add-section", ".cmdline="+cl, "--change-section-vma", fmt.Sprintf(".cmdline=%#x", stubCmdlineVMA),
		"--add-section", ".linux="+s.Kernel, "--change-section-vma", fmt.Sprintf(".linux=%#x", stubKernelVMA),
		"--add-section", ".initrd="+s.Initrd, "--change-section-vma", fmt.Sprintf(".initrd=%#x", initrdVMA),
		efiStub, out)
}

// locate finds file's bytes in the image, whole and contiguous, and
// returns their offset and length; it fails unless they appear exactly
// once.
func locate(image, file string) (int64, int64, error) {
	img, err := os.ReadFile(image)
	if err != nil {
		return 0, 0, err
	}
	want, err := os.ReadFile(file)
	if err != nil {
		return 0, 0, err
	}
	i := bytes.Index(img, want)
	if i < 0 || bytes.Contains(img[i+1:], want) {
		return 0, 0, fmt.Errorf("%s is not stored once and contiguously in %s", file, image)
	}
	return int64(i), int64(len(want)), nil
}
