package failover

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/qmp"
)

// agentTry bounds one attempt to reach a starting guest's agent: one that
// does not answer yet (still booting) is tried again.
const agentTry = 5 * time.Second

// readdressByAgent gives the VM's first network interface vm.AgentAddress
// (and a default route through vm.AgentGateway) through its guest agent,
// with the guest's own `ip` (a Linux guest), then reads the interface's
// addresses back through the agent: the step passes only when the guest
// reports the new one. A failover replaces the interface's addresses;
// a test failover (isolated: m.forward) adds the new one beside the
// isolated network's, which the probes' forwards reach. The guest agent
// is waited for until ctx ends (the guest is booting).
func readdressByAgent(ctx context.Context, vm VM, m *machine) (string, error) {
	if m.agentSock == "" {
		return "", fmt.Errorf("%s has no guest agent channel to re-address it through (agent-address)", vm.Name)
	}
	if _, _, err := net.ParseCIDR(vm.AgentAddress); err != nil {
		return "", fmt.Errorf("agent-address %q: %w", vm.AgentAddress, err)
	}
	ga, err := dialAgent(ctx, m.agentSock)
	if err != nil {
		return "", err
	}
	defer func() { _ = ga.Close() }() // the commands' answers are in
	nic, err := firstInterface(ctx, ga)
	if err != nil {
		return "", err
	}
	script := ""
	if m.forward == nil {
		script = "ip addr flush dev \"$1\" && "
	}
	script += "ip addr add \"$2\" dev \"$1\" && ip link set \"$1\" up"
	args := []string{"/bin/sh", "-c", script, "readdress", nic.Name, vm.AgentAddress}
	if vm.AgentGateway != "" {
		args[2] += " && ip route replace default via \"$3\" dev \"$1\""
		args = append(args, vm.AgentGateway)
	}
	if _, err := ga.Exec(ctx, args); err != nil {
		return "", fmt.Errorf("re-address %s through its guest agent: %w", vm.Name, err)
	}
	nic, err = interfaceNamed(ctx, ga, nic.Name)
	if err != nil {
		return "", err
	}
	have := nic.addresses()
	for _, a := range have {
		if a == vm.AgentAddress {
			return fmt.Sprintf("%s has %s, as the guest agent reports it (guest-network-get-interfaces: %s)",
				nic.Name, vm.AgentAddress, strings.Join(have, " ")), nil
		}
	}
	return "", fmt.Errorf("the guest agent reports %s with %v after the re-addressing, not %s", nic.Name, have, vm.AgentAddress)
}

// dialAgent connects to a starting guest's agent, trying again until it
// answers or ctx ends.
func dialAgent(ctx context.Context, sock string) (*qmp.GuestAgent, error) {
	for {
		tctx, cancel := context.WithTimeout(ctx, agentTry)
		ga, err := qmp.DialGuestAgent(tctx, sock)
		if err == nil {
			err = ga.Execute(tctx, "guest-ping", nil, nil)
			if err != nil {
				_ = ga.Close() // it did not answer: a new connection next
			}
		}
		cancel()
		if err == nil {
			return ga, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the guest agent did not answer: %w", errors.Join(err, ctx.Err()))
		case <-time.After(200 * time.Millisecond): // the socket accepts before the guest's agent runs
		}
	}
}

// guestNIC is one interface as guest-network-get-interfaces reports it.
type guestNIC struct {
	Name      string `json:"name"`
	Hardware  string `json:"hardware-address"`
	Addresses []struct {
		Type   string `json:"ip-address-type"`
		IP     string `json:"ip-address"`
		Prefix int    `json:"prefix"`
	} `json:"ip-addresses"`
}

func (n guestNIC) addresses() []string {
	var out []string
	for _, a := range n.Addresses {
		out = append(out, fmt.Sprintf("%s/%d", a.IP, a.Prefix))
	}
	return out
}

// firstInterface is the guest's first interface other than loopback.
func firstInterface(ctx context.Context, ga *qmp.GuestAgent) (guestNIC, error) {
	return findInterface(ctx, ga, func(n guestNIC) bool { return n.Name != "lo" && n.Hardware != "00:00:00:00:00:00" })
}

func interfaceNamed(ctx context.Context, ga *qmp.GuestAgent, name string) (guestNIC, error) {
	return findInterface(ctx, ga, func(n guestNIC) bool { return n.Name == name })
}

func findInterface(ctx context.Context, ga *qmp.GuestAgent, match func(guestNIC) bool) (guestNIC, error) {
	var nics []guestNIC
	if err := ga.Execute(ctx, "guest-network-get-interfaces", nil, &nics); err != nil {
		return guestNIC{}, fmt.Errorf("the guest's interfaces: %w", err)
	}
	for _, n := range nics {
		if match(n) {
			return n, nil
		}
	}
	return guestNIC{}, fmt.Errorf("the guest agent reports no network interface to re-address (%d interface(s))", len(nics))
}
