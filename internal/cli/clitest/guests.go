package clitest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// BootWriters boots n guests whose workload keeps writing self-verifying
// blocks, each with one qcow2 disk and a guest agent, under dir/vm-N.
func BootWriters(t *testing.T, ctx context.Context, dir string, n int) []*guestvm.VM {
	agents := make([]bool, n)
	for i := range agents {
		agents[i] = true
	}
	return BootGuests(t, ctx, dir, agents)
}

// BootGuests is BootWriters with a guest agent channel only where agents
// says so.
func BootGuests(t *testing.T, ctx context.Context, dir string, agents []bool) []*guestvm.VM {
	n := len(agents)
	testutil.RequireBinary(t, "qemu-system-x86_64")
	testutil.RequireBinary(t, "qemu-img")
	img, err := guestvm.Build(ctx)
	if err != nil {
		if err == guestvm.ErrNoAssets && !testutil.Strict() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	var vms []*guestvm.VM
	for i := range n {
		disk := filepath.Join(dir, fmt.Sprintf("vm-%d.qcow2", i))
		if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", disk, "32M").CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		vm, err := guestvm.Start(ctx, img, guestvm.Options{Name: fmt.Sprintf("web-%d", i),
			UUID: fmt.Sprintf("6b1d3c0e-8f53-4b8e-9a51-0d1c2b3a4f5%d", i), Dir: filepath.Join(dir, fmt.Sprintf("vm-%d", i)),
			Mode: "write", Base: 64, Interval: 20 * time.Millisecond, GuestAgent: agents[i],
			Disks: []guestvm.Disk{{ID: "vda", Path: disk, Format: "qcow2"}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(vm.Kill)
		vms = append(vms, vm)
	}
	for _, vm := range vms {
		if _, err := vm.WaitConsole(ctx, "COFFER READY"); err != nil {
			t.Fatalf("%v\n%s", err, vm.Console())
		}
	}
	return vms
}

// WaitFile waits until text appears in the file at path after byte offset
// from (a console log written by a daemonized QEMU) and returns the offset
// just past it. It polls: the file has no other change notification that
// works for every filesystem the tests run on.
func WaitFile(ctx context.Context, t *testing.T, path string, from int, text string) int {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		b, _ := os.ReadFile(path)
		if from < len(b) {
			if i := strings.Index(string(b[from:]), text); i >= 0 {
				return from + i + len(text)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %q in %s: %v\n%s", text, path, ctx.Err(), b)
		case <-tick.C:
		}
	}
}

// StartBootGuest boots web-1, the boot-mode test guest with a guest agent
// (guestvm.BootMarker, HTTP on guestvm.BootProbePort), for e, whose state
// directory it sets; it returns once the guest shows its login prompt.
func StartBootGuest(ctx context.Context, t *testing.T, e *Env) *guestvm.VM {
	t.Helper()
	testutil.RequireBinary(t, "qemu-system-x86_64")
	img, err := guestvm.Build(ctx)
	if err != nil {
		if err == guestvm.ErrNoAssets && !testutil.Strict() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	e.Vars["COFFER_STATE_DIR"] = filepath.Join(e.Dir, "state")
	disk := filepath.Join(e.Dir, "vda.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", disk, "16M").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	vm, err := guestvm.Start(ctx, img, guestvm.Options{Name: "web-1", Dir: filepath.Join(e.Dir, "vm"), Mode: "boot", GuestAgent: true,
		Disks: []guestvm.Disk{{ID: "vda", Path: disk, Format: "qcow2"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	if _, err := vm.WaitConsole(ctx, guestvm.BootMarker); err != nil {
		t.Fatalf("%v\n%s", err, vm.Console())
	}
	return vm
}

// LibvirtGuest is a guest that keeps writing self-verifying blocks
// (web-1, one 32 MiB qcow2 disk), defined and started under a private
// libvirtd.
type LibvirtGuest struct {
	D    *testutil.Libvirtd
	Disk string // its disk image
	// Virsh runs virsh on the daemon; Wait waits for the console to print
	// s after byte from and returns where s ends.
	Virsh func(args ...string) string
	Wait  func(s string, from int) int
}

// StartLibvirtGuest starts a libvirtd and web-1 on it, a guest whose
// workload writes self-verifying blocks.
func StartLibvirtGuest(t *testing.T, ctx context.Context) *LibvirtGuest {
	t.Helper()
	return StartLibvirtGuestIn(t, ctx, "")
}

// StartLibvirtGuestIn is StartLibvirtGuest with web-1's files (its disk,
// kernel and console log) in vmDir: a directory on storage of the test's
// choice. "" is a directory of the libvirtd's.
func StartLibvirtGuestIn(t *testing.T, ctx context.Context, vmDir string) *LibvirtGuest {
	t.Helper()
	d := testutil.StartLibvirtd(t)
	testutil.RequireBinary(t, "virsh")
	img, err := guestvm.Build(ctx)
	if err != nil {
		if err == guestvm.ErrNoAssets && !testutil.Strict() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	virsh := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("virsh", append([]string{"-c", d.URI}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("virsh %v: %v %s", args, err, out)
		}
		return string(out)
	}
	if vmDir == "" {
		vmDir = filepath.Join(d.Dir, "vm")
	}
	if err := os.MkdirAll(vmDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for src, dst := range map[string]string{img.Kernel: "vmlinuz", img.Initrd: "initrd.gz"} {
		b, _ := os.ReadFile(src)
		if err := os.WriteFile(filepath.Join(vmDir, dst), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	disk := filepath.Join(vmDir, "vda.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", disk, "32M").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if err := d.ChownAll(vmDir); err != nil {
		t.Fatal(err)
	}
	console := filepath.Join(vmDir, "console.log")
	def := filepath.Join(d.Dir, "web-1.xml")
	if err := os.WriteFile(def, []byte(fmt.Sprintf(`<domain type='qemu'><name>web-1</name><memory unit='MiB'>256</memory><vcpu>1</vcpu>
<os><type arch='x86_64' machine='pc'>hvm</type><kernel>%[1]s/vmlinuz</kernel><initrd>%[1]s/initrd.gz</initrd>
<cmdline>%[4]s coffer.mode=write coffer.base=64 coffer.interval=15</cmdline></os>
<devices><disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source file='%[2]s'/><target dev='vda' bus='virtio'/></disk>
<serial type='file'><source path='%[3]s'/><target port='0'/></serial></devices></domain>`, vmDir, disk, console, guestvm.KernelArgs)), 0o644); err != nil {
		t.Fatal(err)
	}
	virsh("define", def)
	virsh("start", "web-1")
	wait := func(s string, from int) int {
		t.Helper()
		for {
			b, _ := os.ReadFile(console)
			if i := bytes.Index(b[min(from, len(b)):], []byte(s)); i >= 0 {
				return min(from, len(b)) + i + len(s)
			}
			if ctx.Err() != nil || bytes.Contains(b, []byte("Kernel panic")) {
				t.Fatalf("guest did not print %q:\n%s", s, b)
			}
			time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
		}
	}
	return &LibvirtGuest{D: d, Disk: disk, Virsh: virsh, Wait: wait}
}

// Image is the guest's disk as it is now, as a raw image at path: the
// truth a point taken while the guest is suspended must restore to.
func (g *LibvirtGuest) Image(t *testing.T, path string) []byte {
	t.Helper()
	if out, err := exec.Command("qemu-img", "convert", "-U", "-O", "raw", g.Disk, path).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
