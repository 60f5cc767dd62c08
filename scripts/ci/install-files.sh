#!/usr/bin/env bash
# Tools the single-file restore tests use to build real guest filesystems:
# partition tables (sfdisk, sgdisk), ext4, XFS, FAT32 (with mtools), NTFS
# (ntfs-3g's mkntfs) and LVM (lvm2, driven through loop devices); the storage
# snapshot tests use XFS and btrfs (btrfs-progs) on loop devices; and
# syslinux, which boot verification's tests install on a guest disk that
# boots through a bootloader (internal/guestvm/bootdisk.go); systemd-boot's
# EFI stub and objcopy (binutils), which make the unified kernel image of
# the guest disk that boots through UEFI (bootdisk_efi.go).
set -euo pipefail
SUDO=""; [ "$(id -u)" != 0 ] && SUDO="sudo"
pkgs=(fdisk gdisk e2fsprogs xfsprogs btrfs-progs dosfstools mtools ntfs-3g lvm2 syslinux syslinux-common systemd-boot-efi binutils)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
