package testutil

import (
	"fmt"
	"net"
	"strings"
	"testing"
)

// TestNetLab: each host has its name and its address, reaches the root
// namespace's servers through the gateway, and reaches nothing while its
// link is cut.
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
	cut.Cut()
	if err := dial(cut); err == nil {
		t.Fatalf("%s reached the gateway through a cut link", cut.Name)
	}
	cut.Mend()
	if err := dial(cut); err != nil {
		t.Fatalf("%s cannot reach the gateway once mended: %v", cut.Name, err)
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
