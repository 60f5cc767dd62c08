#!/usr/bin/env bash
# QEMU (software emulation; nested KVM does not boot guests on CI machines),
# qemu-img/qemu-io/qemu-nbd, qemu-storage-daemon (qemu-system-common; the
# storage-daemon tests), libnbd's nbdinfo for testing coffer's NBD
# server against real clients, and the pieces the test guests are built
# from: a Debian cloud kernel (extracted, not installed) and busybox;
# OVMF, the UEFI firmware EFI guests boot with (boot verification of EFI
# points, its tests' guests).
set -euo pipefail
SUDO=""; [ "$(id -u)" != 0 ] && SUDO="sudo"
pkgs=(qemu-system-x86 qemu-system-common qemu-utils libnbd-bin busybox-static cpio ovmf)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
