package qemu

import (
	"strings"
	"testing"
)

// TestIsolateArgs: the VM's networks, reboot and panic policies go (its
// NICs stay where they are, the first on the probes' network); the
// console, pvpanic, a screen, -S and the restricted probe network come;
// the guest agent's socket is found.
func TestIsolateArgs(t *testing.T) {
	in := []string{"qemu-system-x86_64", "-nodefaults", "-no-reboot", "-m", "256",
		"-netdev", "tap,id=n0,ifname=tap0", "-device", "virtio-net-pci,netdev=n0,mac=52:54:00:00:00:01",
		"-nic", "user", "-action", "panic=none",
		"-chardev", "socket,id=qga0,path=/run/x/qga0.sock,server=on,wait=off",
		"-device", "virtserialport,bus=vser0.0,chardev=qga0,name=org.qemu.guest_agent.0",
		"-serial", "file:/run/x/console.log"}
	iso := IsolateArgs(in, IsolateSpec{Forward: map[int]int{80: 40080}, Console: "/run/x/c.sock", ConsoleLog: "/run/x/console.log"})
	got := strings.Join(iso.Args, " ")
	for _, gone := range []string{"tap0", "netdev=n0", "-no-reboot", "panic=none", "-nic user", "file:/run/x/console.log"} {
		if strings.Contains(got, gone) {
			t.Errorf("%q kept: %s", gone, got)
		}
	}
	for _, want := range []string{"-device virtio-net-pci,mac=52:54:00:00:00:01,netdev=coffer-probe ", "-serial chardev:coffer-console", "socket,id=coffer-console,path=/run/x/c.sock,logfile=/run/x/console.log",
		"-device pvpanic", "-action panic=pause", " -S",
		"-netdev user,id=coffer-probe,restrict=on,hostfwd=tcp:127.0.0.1:40080-:80", "-m 256"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q missing: %s", want, got)
		}
	}
	if iso.AgentSocket != "/run/x/qga0.sock" {
		t.Errorf("agent socket %q", iso.AgentSocket)
	}
	if strings.Count(got, "netdev=coffer-probe") != 1 {
		t.Errorf("the probes' network is not on the VM's own NIC alone: %s", got)
	}
	noNIC := []string{"qemu-system-x86_64", "-nodefaults", "-m", "256"}
	vmxnet3 := strings.Join(IsolateArgs(noNIC, IsolateSpec{Forward: map[int]int{80: 40080}, NIC: "vmxnet3"}).Args, " ")
	if !strings.Contains(vmxnet3, "-device vmxnet3,netdev=coffer-probe") || strings.Contains(vmxnet3, "virtio-net-pci,netdev=coffer-probe") {
		t.Errorf("the probes' adapter of a VMware guest: %s", vmxnet3)
	}
	// The screen comes after the VM's own devices, so that none of them
	// moves to another PCI slot.
	if i, j := strings.Index(got, "virtserialport"), strings.Index(got, "-device VGA"); j < i || strings.Contains(got, "-vga") {
		t.Errorf("the screen is not the last device added: %s", got)
	}
	none := strings.Join(IsolateArgs([]string{"qemu-system-x86_64", "-vga", "none", "-device", "virtio-blk-pci,drive=d"}, IsolateSpec{}).Args, " ")
	if !strings.Contains(none, "-nic none") || !strings.Contains(none, "-vga none -device virtio-blk-pci,drive=d") ||
		!strings.HasSuffix(none, "-device VGA -device pvpanic -action panic=pause -S -nic none") {
		t.Errorf("without probes: %s", none)
	}
}
