package testutil

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// NetLab is a small network of hosts on one machine: network namespaces,
// each with its own address and host name, joined by veth pairs to a
// bridge in the root namespace. coffer processes started in them take the
// paths of separate hosts (another host's repository leases and job
// owners are not this process's PIDs), and a host's link can be cut to
// partition it without killing it.
//
// Addresses come from 198.18.0.0/15, the range RFC 2544 reserves for
// benchmarks, so the lab's traffic goes to nothing outside it. The root
// namespace has the bridge's address (Gateway): servers the hosts reach
// (PostgreSQL, S3) listen there, not on loopback, which a namespace does
// not share. Everything is deleted when the test ends.
type NetLab struct {
	t       testing.TB
	id      string // a short random name prefix: labs of parallel tests do not meet
	subnet  string // 198.18.N
	bridge  string
	Gateway string
	hosts   []*NetHost
	// held: the lab holds the network exclusively until its removal
	// (HoldNetwork), not only while it makes and removes interfaces.
	held bool
}

// NetHost is one host of a NetLab.
type NetHost struct {
	lab  *NetLab
	Name string // its host name (uname -n inside)
	NS   string // its network namespace
	Addr string // its address on the lab's network
	veth string // the root side of its link
}

// NewNetLab makes a lab with one host per name, or skips (fails in CI)
// the test when this machine cannot (not root, no iproute2).
func NewNetLab(t testing.TB, names ...string) *NetLab {
	t.Helper()
	RequireRoot(t)
	RequireBinary(t, "ip")
	RequireBinary(t, "unshare")
	if len(names) > 250 {
		t.Fatalf("a net lab holds at most 250 hosts, not %d", len(names))
	}
	if err := netLabs.acquire(); err != nil {
		t.Fatalf("net lab lock: %v", err)
	}
	t.Cleanup(netLabs.release) // after the lab's removal (cleanups run last first)
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	id := fmt.Sprintf("cl%x", b) // "cl" + 6 hex: interface names stay within IFNAMSIZ (15)
	lab := &NetLab{t: t, id: id, subnet: fmt.Sprintf("198.18.%d", b[0]), bridge: id + "br"}
	lab.Gateway = lab.subnet + ".1"
	t.Cleanup(lab.remove)
	lab.change(func() {
		lab.ip("link", "add", lab.bridge, "type", "bridge")
		lab.ip("link", "set", lab.bridge, "addrgenmode", "none")
		lab.ip("addr", "add", lab.Gateway+"/24", "dev", lab.bridge)
		lab.ip("link", "set", lab.bridge, "up")
		for i, name := range names {
			lab.addHost(name, i+2)
		}
		lab.settle()
	})
	return lab
}

// HoldNetwork keeps the tests that a change of interfaces disturbs
// (LockNetwork) away until the lab is removed, waiting for those running
// to end: a test calls it before it cuts links, so that a cut comes when
// the test says, not after a browser closed.
func (l *NetLab) HoldNetwork() {
	l.t.Helper()
	if l.held {
		return
	}
	if err := changingNetwork.acquire(); err != nil {
		l.t.Fatalf("network lock: %v", err)
	}
	l.held = true
}

// change makes a change of interfaces while no test that it disturbs
// runs.
func (l *NetLab) change(f func()) {
	l.t.Helper()
	if !l.held {
		if err := changingNetwork.acquire(); err != nil {
			l.t.Fatalf("network lock: %v", err)
		}
		defer changingNetwork.release()
	}
	f()
}

func (l *NetLab) addHost(name string, n int) {
	h := &NetHost{lab: l, Name: name, NS: fmt.Sprintf("%s-%d", l.id, n), Addr: fmt.Sprintf("%s.%d", l.subnet, n),
		veth: fmt.Sprintf("%sv%d", l.id, n)}
	peer := h.veth + "p"
	l.ip("netns", "add", h.NS)
	l.hosts = append(l.hosts, h)
	l.ip("link", "add", h.veth, "type", "veth", "peer", "name", peer)
	l.ip("link", "set", h.veth, "addrgenmode", "none")
	l.ip("link", "set", h.veth, "master", l.bridge)
	l.ip("link", "set", h.veth, "up")
	l.ip("link", "set", peer, "netns", h.NS)
	l.ip("-n", h.NS, "link", "set", peer, "name", "eth0")
	l.ip("-n", h.NS, "addr", "add", h.Addr+"/24", "dev", "eth0")
	l.ip("-n", h.NS, "link", "set", "eth0", "up")
	l.ip("-n", h.NS, "link", "set", "lo", "up")
	l.ip("-n", h.NS, "route", "add", "default", "via", l.Gateway)
}

// settle waits until the kernel has said all it will about the lab's
// root-side interfaces, so that nothing changes after the network's lock
// is released: a link's operational state follows its carrier up to a
// second later (the kernel's link watch batches the events), and a
// Chromium that sees it aborts its page loads. (The interfaces have no
// IPv6 link-local address, addrgenmode none, which the kernel would
// otherwise add a second or two after they came up, for the same
// reason.)
func (l *NetLab) settle() {
	l.t.Helper()
	names := []string{l.bridge}
	for _, h := range l.hosts {
		names = append(names, h.veth)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		down := linksNotUp(names)
		if len(down) == 0 {
			return
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("the lab's links %v are not up after 10 s", down)
		}
		time.Sleep(20 * time.Millisecond) // a poll's pace: the kernel sends no event we could wait on here
	}
}

// linksNotUp are those of the named interfaces whose operational state
// is not yet up.
func linksNotUp(names []string) []string {
	var down []string
	for _, name := range names {
		state, err := os.ReadFile(filepath.Join("/sys/class/net", name, "operstate"))
		if err != nil || strings.TrimSpace(string(state)) != "up" {
			down = append(down, name)
		}
	}
	return down
}

// Hosts are the lab's hosts, in the order NewNetLab named them.
func (l *NetLab) Hosts() []*NetHost { return l.hosts }

// Command is a command that runs on the host: in its namespace, with its
// host name (a UTS namespace of its own).
func (h *NetHost) Command(name string, args ...string) *exec.Cmd {
	script := `hostname "$0" && exec "$@"`
	full := append([]string{"netns", "exec", h.NS, "unshare", "--uts", "sh", "-c", script, h.Name, name}, args...)
	return exec.Command("ip", full...)
}

// Cut takes the host's link down: it stays up but reaches nothing, and
// nothing reaches it (a partition), until Mend.
func (h *NetHost) Cut() {
	h.lab.t.Helper()
	h.lab.mustHold("Cut")
	h.lab.ip("link", "set", h.veth, "down")
}

// Mend brings the host's link back up. The neighbours that failed to
// answer while it was cut are forgotten on both sides: the kernel would
// otherwise refuse to send to them ("no route to host") until their
// failed entries age out.
func (h *NetHost) Mend() {
	h.lab.t.Helper()
	h.lab.mustHold("Mend")
	h.lab.ip("link", "set", h.veth, "up")
	h.lab.ip("-n", h.NS, "neigh", "flush", "dev", "eth0")
	h.lab.ip("neigh", "flush", "dev", h.lab.bridge)
}

func (l *NetLab) mustHold(what string) {
	l.t.Helper()
	if !l.held {
		l.t.Fatalf("%s changes a link of a lab that does not hold the network: call HoldNetwork first", what)
	}
}

func (l *NetLab) ip(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// remove deletes the namespaces (their ends of the links go with them),
// the root ends and the bridge; what a failed setup never made is not
// there to delete.
func (l *NetLab) remove() {
	l.change(func() {
		for _, h := range l.hosts {
			_ = exec.Command("ip", "netns", "delete", h.NS).Run()
			_ = exec.Command("ip", "link", "delete", h.veth).Run()
		}
		_ = exec.Command("ip", "link", "delete", l.bridge).Run()
	})
	if l.held {
		changingNetwork.release()
		l.held = false
	}
}
