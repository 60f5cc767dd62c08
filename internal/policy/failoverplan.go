package policy

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/config"
)

// FailoverPlan starts the standbys of a replication at the DR site in
// ordered groups (the failover-plans section; internal/failover):
//
//	failover-plans:
//	  - name: shop
//	    replication: web-dr        # whose standbys the plan starts
//	    groups:
//	      - vms:
//	          - {name: db-01, script: /etc/coffer/dr/db-up.sh}
//	        probes: [tcp:5432]     # every VM of the group answers before the next group
//	        probe-timeout: 2m
//	      - vms:
//	          - {name: web-01, cloud-init: /etc/coffer/dr/web-01}  # re-addressing: cloud-init NoCloud data
//	          - {name: web-02, readdress: /etc/coffer/dr/readdress.sh, address: 10.20.0.12}
//	        delay: 30s             # then wait before the next group (none here)
type FailoverPlan struct {
	Name        string          `yaml:"name"`
	Replication string          `yaml:"replication"`
	Groups      []FailoverGroup `yaml:"groups"`
}

// FailoverGroup is VMs started together; the next group starts once every
// probe of each of them passed (each retried until ProbeTimeout), then
// Delay has passed.
type FailoverGroup struct {
	VMs []FailoverVM `yaml:"vms"`
	// Probes are the boot-verification ladder's probes (tcp:PORT,
	// http:PORT/PATH=STATUS, exec:COMMAND through the guest agent).
	Probes       []string `yaml:"probes"`
	ProbeTimeout Duration `yaml:"probe-timeout"`
	Delay        Duration `yaml:"delay"`
}

// FailoverVM is one VM of a group, by its standby's VM name.
type FailoverVM struct {
	Name string `yaml:"name"`
	// Address is where a failover's tcp and http probes reach the VM on
	// its DR network (a test failover probes through its own forwards).
	Address string `yaml:"address"`
	// CloudInit is a directory of NoCloud data (user-data, meta-data,
	// network-config) attached to the VM as a CIDATA disk: the guest's
	// cloud-init re-addresses it at the DR site.
	CloudInit string `yaml:"cloud-init"`
	// AgentAddress (an address with its prefix length, 10.20.0.11/24) is
	// given to the VM's first network interface through its guest agent
	// once it started, and AgentGateway its default route: a Linux guest
	// runs `ip` for it.
	AgentAddress string `yaml:"agent-address"`
	AgentGateway string `yaml:"agent-gateway"`
	// Readdress is a script run on the DR host once the VM is started and
	// before its group's probes, to re-address it (through its agent, a
	// DHCP reservation, DNS).
	Readdress string `yaml:"readdress"`
	// Script runs on the DR host after the VM's probes passed.
	Script string `yaml:"script"`
}

// DefaultFailoverProbeTimeout bounds each probe of a group by default.
const DefaultFailoverProbeTimeout = 5 * time.Minute

// ProbeTimeoutOrDefault is how long each probe of the group is retried.
func (g FailoverGroup) ProbeTimeoutOrDefault() time.Duration {
	if g.ProbeTimeout > 0 {
		return time.Duration(g.ProbeTimeout)
	}
	return DefaultFailoverProbeTimeout
}

// VMNames lists the plan's VMs in the order they start.
func (p FailoverPlan) VMNames() []string {
	var out []string
	for _, g := range p.Groups {
		for _, v := range g.VMs {
			out = append(out, v.Name)
		}
	}
	return out
}

// FailoverPlan returns the plan with that name.
func (c *Config) FailoverPlan(name string) (FailoverPlan, bool) {
	for _, p := range c.FailoverPlans {
		if p.Name == name {
			return p, true
		}
	}
	return FailoverPlan{}, false
}

// PutFailoverPlan adds p, or replaces the plan of the same name.
func (c *Config) PutFailoverPlan(p FailoverPlan) (*Config, error) {
	n := c.clone()
	n.FailoverPlans = put(n.FailoverPlans, p, func(y FailoverPlan) string { return y.Name })
	return n, n.Validate()
}

// DeleteFailoverPlan removes a plan (what it started stays as it is).
func (c *Config) DeleteFailoverPlan(name string) (*Config, error) {
	if _, ok := c.FailoverPlan(name); !ok {
		return nil, fmt.Errorf("no failover plan named %q", name)
	}
	n := c.clone()
	n.FailoverPlans = slices.DeleteFunc(n.FailoverPlans, func(y FailoverPlan) bool { return y.Name == name })
	return n, n.Validate()
}

// Validate checks one plan against the replication it names.
func (p FailoverPlan) Validate(c *Config) error {
	var errs []error
	p.validate(c, func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) })
	return errors.Join(errs...)
}

func (p FailoverPlan) validate(c *Config, add func(string, ...any)) {
	where := "failover plan " + p.Name
	repl, ok := c.Replication(p.Replication)
	if !ok {
		add("%s: replication %q is not a replication of the configuration (the plan starts its standbys)", where, p.Replication)
	} else if cn, _ := c.Connection(repl.Connection); cn.Kind == "vsphere" {
		p.validateVSphere(add)
	}
	if len(p.Groups) == 0 {
		add("%s: groups is missing: list the VMs to start, in ordered groups", where)
	}
	seen := map[string]bool{}
	for i, g := range p.Groups {
		gw := fmt.Sprintf("%s: group %d", where, i+1)
		if len(g.VMs) == 0 {
			add("%s: vms is missing", gw)
		}
		for _, v := range g.VMs {
			switch {
			case v.Name == "":
				add("%s: a VM without a name", gw)
			case seen[v.Name]:
				add("%s: VM %s is in the plan twice", gw, v.Name)
			case ok && !repl.Matches(v.Name):
				add("%s: VM %s is not one replication %s keeps a standby of (vms %v)", gw, v.Name, repl.Name, repl.VMs)
			}
			seen[v.Name] = true
			if v.AgentAddress != "" {
				if _, _, err := net.ParseCIDR(v.AgentAddress); err != nil {
					add("%s: VM %s: agent-address %q: want an address with its prefix length, like 10.20.0.11/24", gw, v.Name, v.AgentAddress)
				}
			}
			if v.AgentGateway != "" && (v.AgentAddress == "" || net.ParseIP(v.AgentGateway) == nil) {
				add("%s: VM %s: agent-gateway %q: want an IP address, with an agent-address", gw, v.Name, v.AgentGateway)
			}
			for key, f := range map[string]string{"cloud-init": v.CloudInit, "readdress": v.Readdress, "script": v.Script} {
				if f != "" && !filepath.IsAbs(config.ExpandHome(f)) {
					add("%s: VM %s: %s %q is not an absolute path (it is run on the DR host)", gw, v.Name, key, f)
				}
			}
		}
		for _, pr := range g.Probes {
			kind, _, _ := strings.Cut(pr, ":")
			if kind != "tcp" && kind != "http" && kind != "exec" {
				add("%s: probe %q: want tcp:PORT, http:PORT/PATH=STATUS or exec:COMMAND", gw, pr)
			}
		}
		if g.Delay < 0 || g.ProbeTimeout < 0 {
			add("%s: delay and probe-timeout cannot be negative", gw)
		}
	}
}

// validateVSphere refuses what a plan cannot do with standbys kept on a
// vSphere DR site: vCenter starts them, so coffer attaches no CIDATA disk
// and reaches no QEMU guest agent (tcp and http probes reach the VM at
// its address; vCenter reporting it powered on is checked first).
func (p FailoverPlan) validateVSphere(add func(string, ...any)) {
	where := "failover plan " + p.Name
	for i, g := range p.Groups {
		gw := fmt.Sprintf("%s: group %d", where, i+1)
		for _, v := range g.VMs {
			if v.CloudInit != "" || v.AgentAddress != "" || v.AgentGateway != "" {
				add("%s: VM %s: cloud-init, agent-address and agent-gateway are not supported for a standby on a vSphere DR site: re-address it with a readdress script", gw, v.Name)
			}
		}
		for _, pr := range g.Probes {
			if strings.HasPrefix(pr, "exec:") {
				add("%s: probe %q: exec probes need a QEMU guest agent, which a standby on a vSphere DR site has not: use tcp or http probes with the VM's address", gw, pr)
			}
		}
	}
}
