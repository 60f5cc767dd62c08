package libvirt_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/libvirt"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestTestCopyRunsIsolated starts a test copy of a recorded domain whose
// interface is on a network this libvirtd does not have, through the
// libvirtd the test starts (no guest: the firmware finds nothing to boot
// and idles). The copy runs under its own name on the overlay given, its
// QEMU with one NIC, at the interface's PCI address, on a restricted
// user-mode network whose forward listens on the host's 127.0.0.1, and
// the inventory leaves it out. Destroyed, it is gone (transient) with
// its forward; destroying it again is no error, and a name that is not a
// test copy's is refused both ways.
func TestTestCopyRunsIsolated(t *testing.T) {
	testutil.RequireBinary(t, "qemu-img")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := testutil.StartLibvirtd(t)
	dir := filepath.Join(d.Dir, "copy")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(dir, "vda.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", overlay, "16M").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if err := d.ChownAll(dir); err != nil {
		t.Fatal(err)
	}
	conn, err := libvirt.New(libvirt.Config{URI: d.URI, StateDir: filepath.Join(d.Dir, "st")})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	recorded := recordedDefinition(t, d)
	native, _ := json.Marshal(libvirt.NativeConfig{DomainXML: recorded})
	cfg := hypervisor.VMConfig{Kind: "libvirt", Name: "web-1", Native: native}
	port := freePort(t)
	cp := hypervisor.TestCopy{Name: hypervisor.TestCopyPrefix + "ab12cd34-web-1", Disks: map[string]string{"vda": overlay},
		Forward: map[int]int{80: port}, ConsoleLog: filepath.Join(dir, "console.log")}
	if err := conn.StartTestCopy(ctx, cfg, cp); err != nil {
		t.Fatalf("%v\n%s", err, d.Log())
	}
	wantIsolatedQEMU(t, d, cp.Name, overlay, port)
	if c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err != nil {
		t.Fatalf("the copy's forward does not listen: %v", err)
	} else {
		_ = c.Close()
	}
	inv, err := conn.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, vm := range inv {
		if vm.Name == cp.Name {
			t.Fatalf("the inventory lists the test copy: %+v", inv)
		}
	}
	if err := conn.DestroyTestCopy(ctx, "web-1"); err == nil {
		t.Fatal("DestroyTestCopy ended a domain that is not a test copy")
	}
	if err := conn.StartTestCopy(ctx, cfg, hypervisor.TestCopy{Name: "web-1-copy", Disks: cp.Disks}); err == nil {
		t.Fatal("a test copy named like a VM started")
	}
	if err := conn.DestroyTestCopy(ctx, cp.Name); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("virsh", "-c", d.URI, "list", "--all", "--name").CombinedOutput()
	if err != nil || strings.Contains(string(out), cp.Name) {
		t.Fatalf("the destroyed copy is still listed (%v): %s", err, out)
	}
	if c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
		_ = c.Close()
		t.Fatal("the destroyed copy's forward still listens")
	}
	if err := conn.DestroyTestCopy(ctx, cp.Name); err != nil {
		t.Fatalf("destroying a copy that is gone: %v", err)
	}
}

// copyPID is the pid of the QEMU the daemon runs for domain name.
func copyPID(t *testing.T, d *testutil.Libvirtd, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.Dir, "r", "libvirt", "qemu", "run", name+".pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }() // only its port is wanted
	return l.Addr().(*net.TCPAddr).Port
}

// recordedDefinition is web-1's definition as a backup point records it:
// libvirt's, with every device's PCI address. Its interface is on a
// network the daemon does not have, its disk a file that does not exist.
func recordedDefinition(t *testing.T, d *testutil.Libvirtd) string {
	t.Helper()
	def := filepath.Join(d.Dir, "web-1.xml")
	if err := os.WriteFile(def, []byte(`<domain type='qemu'><name>web-1</name><memory unit='MiB'>64</memory><vcpu>1</vcpu>
<os><type arch='x86_64' machine='pc'>hvm</type></os><devices>
<disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source file='/prod/web-1.qcow2'/><target dev='vda' bus='virtio'/></disk>
<interface type='network'><mac address='52:54:00:aa:bb:cc'/><source network='prod-net'/><model type='virtio'/></interface>
</devices></domain>`), 0o644); err != nil {
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
	virsh("define", def)
	recorded := virsh("dumpxml", "--inactive", "web-1")
	virsh("undefine", "web-1")
	return recorded
}

// wantIsolatedQEMU wants the copy's QEMU on the overlay, with one NIC at
// its interface's PCI address on a restricted user-mode network
// forwarding port, and nothing of production's.
func wantIsolatedQEMU(t *testing.T, d *testutil.Libvirtd, name, overlay string, port int) {
	t.Helper()
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(copyPID(t, d, name)) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	args := strings.ReplaceAll(string(cmdline), "\x00", " ")
	for _, want := range []string{overlay, "user,id=coffer-iso0,restrict=on,hostfwd=tcp:127.0.0.1:" + strconv.Itoa(port) + "-:80",
		"virtio-net-pci,netdev=coffer-iso0,mac=52:54:00:aa:bb:cc,bus=pci.0,addr=0x"} {
		if !strings.Contains(args, want) {
			t.Errorf("the copy's QEMU lacks %s: %s", want, args)
		}
	}
	if strings.Contains(args, "/prod/") || strings.Contains(args, "prod-net") || strings.Count(args, "-netdev") != 1 {
		t.Errorf("the copy's QEMU reaches production: %s", args)
	}
}
