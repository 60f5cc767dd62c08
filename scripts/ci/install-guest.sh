#!/usr/bin/env bash
# The pieces of coffer's demo and test guests: a Debian cloud kernel with
# its virtio modules, and qemu-guest-agent for quiesced snapshots. Both are
# downloaded as Debian packages and unpacked (not installed) into
# ${COFFER_GUEST_DIR:-~/.cache/coffer/guest}; internal/guestvm assembles the
# initramfs from them, busybox-static and coffer's guest workload.
set -euo pipefail
dir="${COFFER_GUEST_DIR:-$HOME/.cache/coffer/guest}"
if [ -s "$dir/vmlinuz" ] && [ -x "$dir/qga/usr/sbin/qemu-ga" ] && [ -s "$dir/modules/virtio_net.ko" ] && [ -s "$dir/modules/vmw_pvscsi.ko" ]; then exit 0; fi
mkdir -p "$dir"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
chmod 777 "$work"
cd "$work"
kpkg="$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-/{print $2; exit}')"
if [ -z "$kpkg" ]; then apt-get update -qq; kpkg="$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-/{print $2; exit}')"; fi
apt-get download -q "$kpkg" qemu-guest-agent 2>/dev/null || { apt-get update -qq; apt-get download -q "$kpkg" qemu-guest-agent; }
dpkg-deb -x linux-image-*.deb kernel
rm -rf "$dir/modules" "$dir/qga"
mkdir -p "$dir/modules"
for m in virtio/virtio_ring virtio/virtio virtio/virtio_pci_modern_dev virtio/virtio_pci_legacy_dev virtio/virtio_pci block/virtio_blk char/virtio_console \
    net/net_failover net/virtio_net misc/pvpanic/pvpanic misc/pvpanic/pvpanic-mmio \
    scsi/scsi_common scsi/scsi_mod scsi/sd_mod scsi/vmw_pvscsi net/vmxnet3/vmxnet3; do
  cp kernel/lib/modules/*/kernel/drivers/$m.ko "$dir/modules/"
done
# virtio_net needs failover (net/core); boot verification uses the network
# (forwarded probe ports) and pvpanic (GUEST_PANICKED). The SCSI modules
# and vmxnet3 let a guest boot from a VMware Paravirtual SCSI disk with a
# VMXNET3 adapter (boot verification of vSphere points); guests load them
# only when their command line asks (coffer.modules).
cp kernel/lib/modules/*/kernel/net/core/failover.ko "$dir/modules/"
dpkg-deb -x qemu-guest-agent_*.deb "$dir/qga"
cp kernel/boot/vmlinuz-* "$dir/vmlinuz.tmp" && mv "$dir/vmlinuz.tmp" "$dir/vmlinuz"
echo "guest kernel $kpkg ready in $dir"
