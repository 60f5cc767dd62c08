package vsstandby

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
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
	state := t.TempDir()
	watch := &copyWatch{b: b, seen: &seen, state: state}
	plan := failover.Plan{Name: "shop", Groups: []failover.Group{{
		VMs: []failover.VM{{Name: "web-01", Remote: Standby{Client: b.conn.Client(), Name: standbyName, Mark: "dr/web-01", Connection: "vc"}}}}}}
	rep, err := failover.Rehearse(ctx, plan, failover.RehearseOptions{StateDir: state, Seq: 1, Watch: watch})
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
	if len(seen) != 2 || !strings.HasPrefix(seen[0], `{"host":"vc","name":"coffer-test-`) || !strings.HasPrefix(seen[1], "poweredOn on coffer-test-") {
		t.Fatalf("while the test ran, the copy was %q", seen)
	}
	if got := b.leftovers(); len(got) != 0 {
		t.Fatalf("the test failover left %q", got)
	}
	after := b.standby(standbyName)
	if after.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOff || *after.Snapshot.CurrentSnapshot != *before.Snapshot.CurrentSnapshot ||
		len(after.Snapshot.RootSnapshotList) != len(before.Snapshot.RootSnapshotList) || !bytes.Equal(b.l.ReadFlat(b.l.Disk(standbyName)), disk) {
		t.Fatal("the test failover changed the standby")
	}
}

// copyWatch looks, as the test failover's ready step ends, at the copy
// record in the run's directory (what a later clean-up of a killed run
// reads), then at its copy: its power state and the network its adapter
// connects to.
type copyWatch struct {
	b     *lab
	seen  *[]string
	state string
}

func (w *copyWatch) Probe(failover.ProbeResult) {}
func (w *copyWatch) Step(s failover.Step) {
	if s.Name != "ready" {
		return
	}
	recs, _ := filepath.Glob(filepath.Join(w.state, "failover-tests", "*", "*", "copy.json"))
	for _, r := range recs {
		b, _ := os.ReadFile(r)
		*w.seen = append(*w.seen, string(b))
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

// TestKilledTestCopyIsRemoved: a test failover killed once its copy runs
// leaves the clone, its port group and its switch; DestroyTestCopy, by
// the copy's name the run recorded, removes all three, and the standby
// stays as it was.
func TestKilledTestCopyIsRemoved(t *testing.T) {
	b := newLab(t)
	b.follow(1)
	ctx := context.Background()
	sb := Standby{Client: b.conn.Client(), Name: standbyName, Mark: "dr/web-01"}
	if _, err := sb.StartTestCopy(ctx, "0badc0de", 0); err != nil { // never discarded: the run was killed
		t.Fatal(err)
	}
	if got := b.leftovers(); len(got) != 3 {
		t.Fatalf("the killed run left %q, want its clone, port group and switch", got)
	}
	if err := DestroyTestCopy(ctx, b.conn.Client(), sb.TestCopyName("0badc0de")); err != nil {
		t.Fatal(err)
	}
	if got := b.leftovers(); len(got) != 0 {
		t.Fatalf("left after the clean-up: %q", got)
	}
	if st := b.standby(standbyName).Runtime.PowerState; st != types.VirtualMachinePowerStatePoweredOff {
		t.Fatalf("the standby is %s", st)
	}
	if err := DestroyTestCopy(ctx, b.conn.Client(), standbyName); err == nil {
		t.Fatal("DestroyTestCopy took the standby's name for a copy's")
	}
}

// leftovers names the VMs, networks and switches of test failovers.
func (b *lab) leftovers() []string {
	ctx := context.Background()
	var vms []mo.VirtualMachine
	b.l.Retrieve(ctx, "VirtualMachine", []string{"name"}, &vms)
	var nets []mo.Network
	b.l.Retrieve(ctx, "Network", []string{"name"}, &nets)
	var out []string
	for _, n := range append(append(names(vms), netNames(nets)...), b.vswitches()...) {
		if strings.HasPrefix(n, testCopyPrefix) {
			out = append(out, n)
		}
	}
	return out
}

// TestTestCopiesOfOneRunHaveNetworksOfTheirOwn: the copies of two
// standbys in one test failover, which start at once, each get a switch
// and port group of their own, within a standard switch's 32 characters,
// and the clean-up of a killed run finds each copy's from its name.
func TestTestCopiesOfOneRunHaveNetworksOfTheirOwn(t *testing.T) {
	const run = "0123abcd"
	a, b := Standby{Name: "web-01-standby"}, Standby{Name: strings.Repeat("a-very-long-vm-name-", 8) + "standby"}
	na, nb := testCopyNet(run, a.Name), testCopyNet(run, b.Name)
	if na == nb || len(na) > 32 || len(nb) > 32 || !strings.HasPrefix(na, testCopyPrefix+run+"-") {
		t.Fatalf("networks %q and %q", na, nb)
	}
	for _, s := range []Standby{a, b} {
		if got, ok := testCopyNetOf(s.TestCopyName(run)); !ok || got != testCopyNet(run, s.Name) {
			t.Fatalf("the clean-up of %s finds network %q, want %q", s.TestCopyName(run), got, testCopyNet(run, s.Name))
		}
	}
}
