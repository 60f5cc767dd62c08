package hypervisor

import (
	"fmt"
	"sort"
	"strings"
)

// TestCopyPrefix begins the name of every test failover's copy of a
// standby VM: a connector ends no VM of another name as a test copy,
// whatever name a killed run's record gives it.
const TestCopyPrefix = "coffer-test-"

// TestCopy is a throw-away copy of a standby VM that a test failover
// starts on the DR host's hypervisor (libvirt: a transient domain, which
// the hypervisor forgets once it stops), on overlays above a restore
// point, on an isolated network.
type TestCopy struct {
	Name string
	UUID string // "": a new one
	// Disks maps each disk key to the overlay the copy runs on; a disk of
	// the recorded VM not among them is left out, so that the copy opens
	// no production file.
	Disks map[string]string
	// Forward maps guest TCP ports to ports of the host's 127.0.0.1.
	Forward map[int]int
	// ConsoleLog receives the copy's first serial port.
	ConsoleLog string
}

// HostForwards is the hostfwd options of a QEMU user-mode netdev that
// forward (guest TCP port to a port of the host's 127.0.0.1) asks for,
// in the guest ports' order: a test failover's probes reach an isolated
// VM only through them.
func HostForwards(forward map[int]int) string {
	guest := make([]int, 0, len(forward))
	for g := range forward {
		guest = append(guest, g)
	}
	sort.Ints(guest)
	var b strings.Builder
	for _, g := range guest {
		fmt.Fprintf(&b, ",hostfwd=tcp:127.0.0.1:%d-:%d", forward[g], g)
	}
	return b.String()
}
