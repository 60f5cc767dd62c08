package guestvm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Image is a bootable guest: kernel plus initramfs.
type Image struct {
	Kernel, Initrd string
}

// AssetDir is where scripts/ci/install-guest.sh put the kernel, modules
// and qemu-guest-agent.
func AssetDir() string {
	if d := os.Getenv("COFFER_GUEST_DIR"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "coffer", "guest")
}

// ErrNoAssets means install-guest.sh has not run.
var ErrNoAssets = errors.New("guest kernel not found: run scripts/ci/install-guest.sh")

// initScript is PID 1: mount, load virtio modules (the cloud kernel builds
// them as modules and has no modules.dep, so the order matters), start the
// guest agent when asked, then hand over to the workload.
const initScript = `#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /tmp /run /usr/bin /usr/sbin /sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk virtio_console; do
  insmod /lib/modules/$m.ko
done
# Boot verification's guests: a NIC for forwarded probe ports, pvpanic so
# that a panic reaches QEMU (GUEST_PANICKED). Older asset directories lack
# them; the guests that do not need them boot the same.
for m in failover net_failover virtio_net pvpanic pvpanic-mmio; do
  [ -f /lib/modules/$m.ko ] && insmod /lib/modules/$m.ko
done
# Drivers a guest asks for by name (coffer.modules=a,b in load order): a
# boot disk made for a vSphere VM needs its SCSI controller and adapter.
for m in $(sed -n 's/.*coffer[.]modules=\([^ ]*\).*/\1/p' /proc/cmdline | tr , ' '); do
  insmod /lib/modules/$m.ko
done
if grep -q coffer.qga=1 /proc/cmdline; then
  mkdir -p /dev/virtio-ports
  i=0
  while [ $i -lt 100 ] && ! ls /sys/class/virtio-ports/*/name >/dev/null 2>&1; do sleep 0.05; i=$((i+1)); done
  for p in /sys/class/virtio-ports/*; do ln -sf /dev/$(basename $p) /dev/virtio-ports/$(cat $p/name); done
  /qga/ld-linux-x86-64.so.2 --library-path /qga/lib /qga/qemu-ga -m virtio-serial \
    -p /dev/virtio-ports/org.qemu.guest_agent.0 -t /tmp -f /tmp/qga.pid &
  echo "COFFER QGA started"
fi
exec /workload
`

var (
	buildOnce sync.Once
	built     *Image
	buildErr  error
)

// Build returns the guest image, building the initramfs once per process
// (and once per content: the result is cached next to the assets).
func Build(ctx context.Context) (*Image, error) {
	buildOnce.Do(func() { built, buildErr = build(ctx) })
	return built, buildErr
}

func build(ctx context.Context) (*Image, error) {
	dir := AssetDir()
	kernel := filepath.Join(dir, "vmlinuz")
	if _, err := os.Stat(kernel); err != nil {
		return nil, ErrNoAssets
	}
	root, err := os.MkdirTemp("", "coffer-guest-root-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(root) }()
	if err := buildWorkload(ctx, filepath.Join(root, "workload")); err != nil {
		return nil, err
	}
	for _, d := range []string{"bin", "lib/modules", "qga/lib"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(root, "init"), []byte(initScript), 0o755); err != nil {
		return nil, err
	}
	if err := copyFile("/bin/busybox", filepath.Join(root, "bin/busybox")); err != nil {
		return nil, fmt.Errorf("busybox-static: %w", err)
	}
	mods, _ := filepath.Glob(filepath.Join(dir, "modules", "*.ko"))
	for _, m := range mods {
		if err := copyFile(m, filepath.Join(root, "lib/modules", filepath.Base(m))); err != nil {
			return nil, err
		}
	}
	if err := addGuestAgent(ctx, dir, root); err != nil {
		return nil, err
	}
	h := sha256.New()
	_ = filepath.Walk(root, func(p string, fi os.FileInfo, err error) error { // its function returns no error
		if err == nil && fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			h.Write([]byte(p[len(root):]))
			h.Write(b)
		}
		return nil
	})
	initrd := filepath.Join(dir, "initrd-"+hex.EncodeToString(h.Sum(nil))[:16]+".gz")
	if _, err := os.Stat(initrd); err == nil {
		return &Image{Kernel: kernel, Initrd: initrd}, nil
	}
	// A temporary file of this process's own: test binaries build the
	// same initramfs side by side, and a shared name let one truncate
	// what another was about to rename into place.
	f, err := os.CreateTemp(dir, filepath.Base(initrd)+".*.tmp")
	if err != nil {
		return nil, err
	}
	tmp := f.Name()
	_ = f.Close()
	defer func() { _ = os.Remove(tmp) }() // a no-op once renamed
	cmd := exec.CommandContext(ctx, "sh", "-c", `find . | cpio -o -H newc --quiet | gzip -1 > "$0"`, tmp)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initramfs: %v: %s", err, out)
	}
	if err := os.Rename(tmp, initrd); err != nil {
		return nil, err
	}
	return &Image{Kernel: kernel, Initrd: initrd}, nil
}

// buildWorkload compiles the static workload binary from coffer's source.
func buildWorkload(ctx context.Context, out string) error {
	src, err := moduleDir(ctx)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./internal/guestvm/workload")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build guest workload: %v: %s", err, b)
	}
	return nil
}

// moduleDir finds coffer's source tree: COFFER_SRC, or the module
// containing the working directory.
func moduleDir(ctx context.Context) (string, error) {
	if d := os.Getenv("COFFER_SRC"); d != "" {
		return d, nil
	}
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil || !strings.Contains(string(out), "/") {
		return "", fmt.Errorf("the demo guest is built from coffer's source: run from the source tree or set COFFER_SRC (%v)", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// addGuestAgent copies qemu-ga and the host libraries it links against
// (the host has them: QEMU depends on the same glib) into the initramfs.
func addGuestAgent(ctx context.Context, dir, root string) error {
	qga := filepath.Join(dir, "qga/usr/sbin/qemu-ga")
	if _, err := os.Stat(qga); err != nil {
		return nil // quiesce tests will report the agent missing
	}
	if err := copyFile(qga, filepath.Join(root, "qga/qemu-ga")); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "ldd", qga).Output()
	if err != nil {
		return fmt.Errorf("ldd qemu-ga: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		var lib string
		switch {
		case len(f) >= 3 && f[1] == "=>":
			lib = f[2]
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			lib = f[0]
		default:
			continue
		}
		if strings.Contains(lib, "not") {
			return fmt.Errorf("qemu-ga needs a library the host lacks: %s", line)
		}
		name := filepath.Base(lib)
		dst := filepath.Join(root, "qga/lib", name)
		if strings.HasPrefix(name, "ld-linux") {
			dst = filepath.Join(root, "qga", name)
		}
		if err := copyFile(lib, dst); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if bytes.HasPrefix(b, []byte("\x7fELF")) || strings.HasSuffix(src, ".ko") {
		return os.WriteFile(dst, b, 0o755)
	}
	return os.WriteFile(dst, b, 0o644)
}
