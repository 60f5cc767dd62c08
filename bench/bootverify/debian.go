package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/coffer-backup/coffer/internal/guestvm"
)

// The Debian guest is a Debian 12 system as a cloud image has it, built
// from Debian's packages: systemd, the cloud kernel and its initramfs
// (initramfs-tools), qemu-guest-agent, OpenSSH, systemd-networkd taking
// an address by DHCP on any Ethernet adapter. It boots under UEFI from a
// GPT disk (guestvm.BuildEFISystemDisk: the loader is a unified kernel
// image of Debian's kernel and initramfs), mounts its root file system by
// label and shows a login prompt on the serial console and the screen.
//
// A Debian cloud image cannot be fetched where only package registries
// are reachable; mmdebstrap builds the same system through apt.
const (
	debianSuite    = "bookworm"
	debianRootMiB  = 2048
	debianLabel    = "coffer-root"
	debianHostname = "coffer-debian"
	debianCmdline  = "root=LABEL=" + debianLabel + " ro console=tty0 console=ttyS0 " +
		"no_timer_check" // as for the busybox guest (guestvm.KernelArgs): TCG on a loaded host
)

// debianPackages are installed beside the minbase variant.
var debianPackages = []string{"systemd-sysv", "udev", "linux-image-cloud-amd64", "initramfs-tools", "qemu-guest-agent",
	"openssh-server", "iproute2"}

// debianImage returns the Debian guest's raw disk, built once and cached
// under ~/.cache/coffer/debian-guest (about 700 MiB of a 2 GiB sparse
// file); it is named when whole, so an interrupted build starts again.
func debianImage(ctx context.Context, logf func(string, ...any)) (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(home, ".cache", "coffer", "debian-guest")
	img := filepath.Join(dir, debianSuite+"-efi.raw")
	if _, err := os.Stat(img); err == nil {
		return img, nil
	}
	for _, tool := range append([]string{"mmdebstrap"}, guestvm.EFIBootDiskTools...) {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("building the Debian guest needs %s: apt-get install mmdebstrap systemd-boot-efi binutils mtools dosfstools fdisk", tool)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	work, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	root := filepath.Join(work, "root")
	logf("building the Debian guest with mmdebstrap into %s (once; cached as %s)", root, img)
	network := "[Match]\nName=en*\n\n[Network]\nDHCP=ipv4\n"
	args := []string{"--variant=minbase", "--include=" + strings.Join(debianPackages, ","),
		"--customize-hook=echo " + debianHostname + ` > "$1/etc/hostname"`,
		"--customize-hook=echo 'LABEL=" + debianLabel + ` / ext4 defaults 0 1' > "$1/etc/fstab"`,
		"--customize-hook=printf '" + strings.ReplaceAll(network, "\n", `\n`) + `' > "$1/etc/systemd/network/10-dhcp.network"`,
		`--customize-hook=chroot "$1" systemctl enable systemd-networkd`,
		debianSuite, root}
	cmd := exec.CommandContext(ctx, "mmdebstrap", args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("mmdebstrap: %w", err)
	}
	kernels, _ := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-*"))
	initrds, _ := filepath.Glob(filepath.Join(root, "boot", "initrd.img-*"))
	if len(kernels) != 1 || len(initrds) != 1 {
		return "", fmt.Errorf("the Debian guest has kernels %v and initramfs images %v: want one of each", kernels, initrds)
	}
	tmp := filepath.Join(work, "disk.raw")
	if _, err := guestvm.BuildEFISystemDisk(ctx, tmp, guestvm.EFISystem{Kernel: kernels[0], Initrd: initrds[0],
		Cmdline: debianCmdline, RootDir: root, RootLabel: debianLabel, RootMiB: debianRootMiB}); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, img); err != nil {
		return "", err
	}
	return img, nil
}
