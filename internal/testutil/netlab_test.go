package testutil

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestNetLab: each host has its name and its address, reaches the root
// namespace's servers through the gateway, and reaches nothing while its
// link is cut (the lab holding the network by then: no browser starts).
func TestNetLab(t *testing.T) {
	lab := NewNetLab(t, "kvm1", "kvm2")
	ln, err := net.Listen("tcp", lab.Gateway+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	dial := func(h *NetHost) error {
		return h.Command("timeout", "2", "bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/%d", lab.Gateway, port)).Run()
	}
	for _, h := range lab.Hosts() {
		out, err := h.Command("hostname").Output()
		if err != nil || strings.TrimSpace(string(out)) != h.Name {
			t.Fatalf("host name on %s: %q %v", h.Name, out, err)
		}
		if err := dial(h); err != nil {
			t.Fatalf("%s cannot reach the gateway: %v", h.Name, err)
		}
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if from := c.RemoteAddr().(*net.TCPAddr).IP.String(); from != h.Addr {
			t.Errorf("%s's connection came from %s, want %s", h.Name, from, h.Addr)
		}
		_ = c.Close()
	}
	cut := lab.Hosts()[0]
	lab.HoldNetwork()
	cut.Cut()
	if err := dial(cut); err == nil {
		t.Fatalf("%s reached the gateway through a cut link", cut.Name)
	}
	if browserMayStart(t) {
		t.Fatal("a browser may start while the lab holds the network")
	}
	cut.Mend()
	if err := dial(cut); err != nil {
		t.Fatalf("%s cannot reach the gateway once mended: %v", cut.Name, err)
	}
}

// TestNetLabChangesTheNetworkAlone: a lab holds the network exclusively
// only while it makes its interfaces, and again to remove them, unless
// it holds it for its life (HoldNetwork): browsers may run beside a lab
// that cuts no link.
func TestNetLabChangesTheNetworkAlone(t *testing.T) {
	t.Run("lab", func(t *testing.T) {
		lab := NewNetLab(t, "kvm1")
		if changingNetwork.holders != 0 {
			t.Fatalf("the lab holds the network after making its interfaces: %d holders", changingNetwork.holders)
		}
		lab.HoldNetwork()
		lab.HoldNetwork() // once is enough
		if changingNetwork.holders != 1 || browserMayStart(t) {
			t.Fatalf("the lab does not hold the network: %d holders", changingNetwork.holders)
		}
	})
	if changingNetwork.holders != 0 || netLabs.holders != 0 {
		t.Fatalf("after the lab's removal: %d holders of the network, %d of the labs' lock", changingNetwork.holders, netLabs.holders)
	}
}

// browserMayStart tells whether a test that needs the network steady
// could start now (the shared lock, tried from a file of its own, as
// another process would).
func browserMayStart(t *testing.T) bool {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), steadyNetwork.name), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	switch err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); {
	case err == nil:
		return true // (closing the file releases it)
	case errors.Is(err, syscall.EWOULDBLOCK):
		return false
	default:
		t.Fatal(err)
		return false
	}
}

// TestPostgresOnLab: a lab's host reaches the PostgreSQL the test starts
// at the gateway's address.
func TestPostgresOnLab(t *testing.T) {
	lab := NewNetLab(t, "worker1")
	dsn := StartPostgresOnLab(t, lab)
	bin := PostgresBinDir(t)
	out, err := lab.Hosts()[0].Command(bin+"/psql", dsn, "-Atc", "select inet_client_addr()").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != lab.Hosts()[0].Addr {
		t.Fatalf("psql from the lab's host: %q %v", out, err)
	}
}

// TestNetLabIsSettledWhenMade: once NewNetLab returns (and the network's
// lock is released), the kernel says nothing more about the lab's
// interfaces in the root namespace, where browsers run. It used to, a
// second or two later: a bridge's state once its port had carrier, and
// IPv6 link-local addresses; a Chromium beside it aborted a page load
// with ERR_NETWORK_CHANGED (a CI run did).
func TestNetLabIsSettledWhenMade(t *testing.T) {
	lab := NewNetLab(t, "kvm1", "kvm2")
	monitor := exec.Command("timeout", "3", "ip", "-o", "monitor", "link", "address")
	out, err := monitor.Output()
	if err != nil && monitor.ProcessState.ExitCode() != 124 { // 124: timeout ended it, as meant
		t.Fatalf("ip monitor: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, lab.id) {
			t.Errorf("after the lab was made: %s", line)
		}
	}
}
