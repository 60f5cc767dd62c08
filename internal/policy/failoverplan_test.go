package policy

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestFailoverPlanValidate: a plan names a replication of the
// configuration, groups of VMs that replication keeps, each VM once,
// absolute scripts and probes of the ladder's kinds; each problem is
// named.
func TestFailoverPlanValidate(t *testing.T) {
	var mover yaml.Node
	if err := yaml.Unmarshal([]byte("{data-mover-vm: dr-mover}"), &mover); err != nil {
		t.Fatal(err)
	}
	c := &Config{Connections: []Connection{{Name: "dr", Kind: "qemu"}, {Name: "vc", Kind: "vsphere", Options: *mover.Content[0]}},
		Replications: []Replication{{Name: "web-dr", VMs: []string{"web-*", "db-01"}, Connection: "dr", Directory: "/srv/dr"},
			{Name: "web-vs", VMs: []string{"web-*", "db-01"}, Connection: "vc", Storage: map[string]string{"ds1": "dr-ds1"}}}}
	good := FailoverPlan{Name: "shop", Replication: "web-dr", Groups: []FailoverGroup{
		{VMs: []FailoverVM{{Name: "db-01", Script: "/etc/dr/db.sh"}}, Probes: []string{"tcp:5432"}},
		{VMs: []FailoverVM{{Name: "web-01", CloudInit: "/etc/dr/web-01"},
			{Name: "web-02", AgentAddress: "10.20.0.12/24", AgentGateway: "10.20.0.1"}}, Delay: Duration(1e9)},
	}}
	if err := good.Validate(c); err != nil {
		t.Fatalf("a good plan: %v", err)
	}
	if got := strings.Join(good.VMNames(), ","); got != "db-01,web-01,web-02" {
		t.Fatalf("order: %s", got)
	}
	for want, edit := range map[string]func(p *FailoverPlan){
		"is not a replication": func(p *FailoverPlan) { p.Replication = "nope" },
		"cloud-init, agent-address and agent-gateway are not supported for a standby on a vSphere DR site": func(p *FailoverPlan) {
			p.Replication = "web-vs"
		},
		"exec probes need a QEMU guest agent": func(p *FailoverPlan) {
			p.Replication, p.Groups[1].VMs = "web-vs", p.Groups[1].VMs[:0]
			p.Groups[0].Probes = []string{"exec:true"}
		},
		"groups is missing":          func(p *FailoverPlan) { p.Groups = nil },
		"in the plan twice":          func(p *FailoverPlan) { p.Groups[1].VMs = append(p.Groups[1].VMs, FailoverVM{Name: "db-01"}) },
		"not one replication web-dr": func(p *FailoverPlan) { p.Groups[1].VMs = []FailoverVM{{Name: "mail-01"}} },
		"not an absolute path":       func(p *FailoverPlan) { p.Groups[1].VMs = []FailoverVM{{Name: "web-01", Readdress: "x.sh"}} },
		"want tcp:PORT":              func(p *FailoverPlan) { p.Groups[0].Probes = []string{"ping:1"} },
		"vms is missing":             func(p *FailoverPlan) { p.Groups[0].VMs = nil },
		"cannot be negative":         func(p *FailoverPlan) { p.Groups[0].Delay = -1 },
		"want an address with its prefix length": func(p *FailoverPlan) {
			p.Groups[1].VMs = []FailoverVM{{Name: "web-01", AgentAddress: "10.20.0.11"}}
		},
		"agent-gateway \"10.20.0.1\": want an IP address, with an agent-address": func(p *FailoverPlan) {
			p.Groups[1].VMs = []FailoverVM{{Name: "web-01", AgentGateway: "10.20.0.1"}}
		},
	} {
		p := good
		p.Groups = []FailoverGroup{good.Groups[0], good.Groups[1]}
		p.Groups[0].VMs = append([]FailoverVM(nil), good.Groups[0].VMs...)
		p.Groups[1].VMs = append([]FailoverVM(nil), good.Groups[1].VMs...)
		edit(&p)
		if err := p.Validate(c); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
	vs := FailoverPlan{Name: "vs", Replication: "web-vs", Groups: []FailoverGroup{
		{VMs: []FailoverVM{{Name: "db-01", Address: "10.20.0.5", Readdress: "/etc/dr/db.sh"}}, Probes: []string{"tcp:5432"}, Delay: Duration(1e9)},
		{VMs: []FailoverVM{{Name: "web-01", Script: "/etc/dr/web.sh"}}},
	}}
	if err := vs.Validate(c); err != nil {
		t.Fatalf("a good plan of vSphere standbys: %v", err)
	}
	n, err := c.PutFailoverPlan(good)
	if err != nil || len(n.FailoverPlans) != 1 || len(c.FailoverPlans) != 0 {
		t.Fatalf("put: %v", err)
	}
	if _, err := n.DeleteReplication("web-dr"); err == nil || !strings.Contains(err.Error(), "failover plan shop") {
		t.Fatalf("deleting the plan's replication: %v", err)
	}
	if n, err = n.DeleteFailoverPlan("shop"); err != nil || len(n.FailoverPlans) != 0 {
		t.Fatalf("delete: %v", err)
	}
}
