package vsstandby

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/failover"
)

// TestTestFailoverOfStandbyLeavesItUntouched: a test failover of a plan
// of one vSphere standby powers on a clone of its point on a port group
// of a new switch without uplinks, its adapter connected there, reports
// it ready and its probes as not run, then destroys the clone, the port
// group and the switch; the standby stays powered off on the same point,
// with the same snapshots and disk bytes.
func TestTestFailoverOfStandbyLeavesItUntouched(t *testing.T) {
	b := newLab(t)
	b.follow(2)
	ctx := context.Background()
	before := b.standby(standbyName)
	disk := b.l.ReadFlat(b.l.Disk(standbyName))
	var seen []string
	watch := &copyWatch{b: b, seen: &seen}
	plan := failover.Plan{Name: "shop", Groups: []failover.Group{{
		VMs: []failover.VM{{Name: "web-01", Remote: Standby{Client: b.conn.Client(), Name: standbyName, Mark: "dr/web-01"}}}}}}
	rep, err := failover.Rehearse(ctx, plan, failover.RehearseOptions{StateDir: t.TempDir(), Seq: 1, Watch: watch})
	if err != nil || !rep.Passed {
		t.Fatalf("test failover: %v %+v", err, rep)
	}
	var got []string
	for _, s := range rep.Steps {
		got = append(got, s.VM+":"+s.Name)
	}
	if want := "web-01:start web-01:ready :discard"; strings.Join(got, " ") != want {
		t.Fatalf("steps %q, want %q", got, want)
	}
	if len(seen) != 1 || !strings.HasPrefix(seen[0], "poweredOn on coffer-test-") {
		t.Fatalf("while the test ran, the copy was %q", seen)
	}
	var vms []mo.VirtualMachine
	b.l.Retrieve(ctx, "VirtualMachine", []string{"name"}, &vms)
	var nets []mo.Network
	b.l.Retrieve(ctx, "Network", []string{"name"}, &nets)
	for _, n := range append(append(names(vms), netNames(nets)...), b.vswitches()...) {
		if strings.HasPrefix(n, testCopyPrefix) {
			t.Fatalf("the test failover left %s", n)
		}
	}
	after := b.standby(standbyName)
	if after.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOff || *after.Snapshot.CurrentSnapshot != *before.Snapshot.CurrentSnapshot ||
		len(after.Snapshot.RootSnapshotList) != len(before.Snapshot.RootSnapshotList) || !bytes.Equal(b.l.ReadFlat(b.l.Disk(standbyName)), disk) {
		t.Fatal("the test failover changed the standby")
	}
}

// copyWatch looks, as the test failover's ready step ends, at its copy:
// its power state and the network its adapter connects to.
type copyWatch struct {
	b    *lab
	seen *[]string
}

func (w *copyWatch) Probe(failover.ProbeResult) {}
func (w *copyWatch) Step(s failover.Step) {
	if s.Name != "ready" {
		return
	}
	var vms []mo.VirtualMachine
	w.b.l.Retrieve(context.Background(), "VirtualMachine", []string{"name", "runtime.powerState", "config.hardware.device"}, &vms)
	for _, vm := range vms {
		if !strings.HasPrefix(vm.Name, testCopyPrefix) {
			continue
		}
		for _, d := range vm.Config.Hardware.Device {
			if card, ok := d.(types.BaseVirtualEthernetCard); ok {
				e := card.GetVirtualEthernetCard()
				nb, _ := e.Backing.(*types.VirtualEthernetCardNetworkBackingInfo)
				if nb != nil && e.Connectable.StartConnected {
					*w.seen = append(*w.seen, string(vm.Runtime.PowerState)+" on "+nb.DeviceName)
				}
			}
		}
	}
}

func names(vms []mo.VirtualMachine) []string {
	var out []string
	for _, v := range vms {
		out = append(out, v.Name)
	}
	return out
}

func netNames(ns []mo.Network) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Name)
	}
	return out
}

// vswitches names the virtual switches of every host.
func (b *lab) vswitches() []string {
	ctx := context.Background()
	var hosts []mo.HostSystem
	b.l.Retrieve(ctx, "HostSystem", []string{"configManager"}, &hosts)
	var out []string
	for _, h := range hosts {
		var ns mo.HostNetworkSystem
		if err := property.DefaultCollector(b.conn.Client()).RetrieveOne(ctx, *h.ConfigManager.NetworkSystem, []string{"networkInfo"}, &ns); err != nil {
			b.t.Fatal(err)
		}
		for _, v := range ns.NetworkInfo.Vswitch {
			out = append(out, v.Name)
		}
	}
	return out
}
