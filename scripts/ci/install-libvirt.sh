#!/usr/bin/env bash
# libvirt for the libvirt connector's tests (internal/hypervisor/libvirt):
# the monolithic libvirtd (Debian 12 has no virtqemud) with its QEMU
# driver, and virsh, which the tests use to look at what coffer left.
# No libvirt-daemon-system: it would pull systemd packages, and the tests
# start a private libvirtd of their own (session mode, as an unprivileged
# user) instead of the machine's.
set -euo pipefail
SUDO=""; [ "$(id -u)" != 0 ] && SUDO="sudo"
pkgs=(libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
