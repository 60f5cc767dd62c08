package console_test

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/testutil/vclab"
)

// TestConsoleRestoreVSphere: a vSphere VM (vcsim) backed up, its disk
// written over since; the restore wizard's "Onto the original VM" refuses
// a confirmation that is not the VM's name at its step (no task, the
// disk untouched), its task fails and says why while the VM runs, and
// with the VM powered off and its name typed, the VM's disk holds the
// point's bytes again. Then its instant recovery (vsphereInstant).
func TestConsoleRestoreVSphere(t *testing.T) {
	l := newLab(t)
	vc := vclab.New(t, vclab.Start(t, 1, 0))
	vm := vc.VMs[0]
	disk := vc.Disk(vm.Name)
	backedUp := make([]byte, disk.Size)
	_, _ = rand.Read(backedUp[:disk.Size/2])
	vc.WriteFlat(disk, backedUp)
	l.config(vc.Connection("vc", filepath.Join(l.dir, "vc.password")) +
		"policies:\n  - name: p\n    connection: vc\n    select: {names: [" + vm.Name + "]}\n")
	l.coffer("init")
	l.coffer("run", "p")
	since := bytes.Repeat([]byte("written since the backup "), int(disk.Size)/25+1)[:disk.Size]
	vc.WriteFlat(disk, since)

	l.start()
	c := l.chrome()
	c.firstRun()
	var points []api.BackupPoint
	if code := l.get(l.adminToken(), "/api/v1/repositories/default/points", &points); code != 200 || len(points) != 1 {
		t.Fatalf("points: %d %+v", code, points)
	}
	c.open("/ui/points/default/p/" + points[0].ID + "/restore")
	c.run(chromedp.Click("#what-original"), chromedp.WaitVisible("#restore-form"))
	wizard := c.location()
	c.waitText("#restore-form", "overwritten")

	// A confirmation that is not the VM's name: refused at the step.
	c.retype("#r-confirm", "app-02")
	c.run(chromedp.Click("#restore-start"))
	c.waitText("#restore-result", "type the VM's name, "+vm.Name)
	if loc := c.location(); loc != wizard || !bytes.Equal(vc.ReadFlat(disk), since) {
		t.Fatalf("a refused confirmation went to %s or changed the disk", loc)
	}
	c.shot("restore-original")

	// Running: the task fails, saying so; the disk is untouched.
	vc.Power(vm, true)
	c.retype("#r-confirm", vm.Name)
	c.clickAway("#restore-start")
	if loc := c.location(); !strings.Contains(loc, "/ui/tasks/") {
		t.Fatalf("the restore opened %s, not its task", loc)
	}
	c.waitText("#task-status", "failed")
	c.finalDetails()
	c.waitText("main", "running")
	if !bytes.Equal(vc.ReadFlat(disk), since) {
		t.Fatal("a restore refused for a running VM changed its disk")
	}

	// Powered off: the disk holds the point's bytes again.
	vc.Power(vm, false)
	c.run(chromedp.Navigate(wizard), chromedp.WaitVisible("#restore-form"))
	c.retype("#r-confirm", vm.Name)
	c.clickAway("#restore-start")
	c.waitText("#task-status", "success")
	// The live log has every line, the last ones too (the stream gives a
	// task that ended its log before its final state).
	c.waitText("#log", "writing disk")
	if !bytes.Equal(vc.ReadFlat(disk), backedUp) {
		t.Fatal("the VM's disk after a restore onto the original differs from the point")
	}
	vsphereInstant(t, l, c, vc, points[0])
}

// vsphereInstant: the instant recovery step of a vSphere point asks where
// its VM runs (the ESXi host, the NFS export's address), and with them
// the VM runs on the host from the export's datastore, shown running on
// the Restore page; discarded there, the VM and the datastore are gone.
//
// vcsim mounts nothing: its CreateNasDatastore takes the datastore's
// name as a directory of the simulator's working directory (this
// process's), so the test works in a directory of its own where that
// name links to the session's export directory (as restorecmd's
// vsInstant does).
func vsphereInstant(t *testing.T, l *lab, c *chrome, vc *vclab.Lab, pt api.BackupPoint) {
	c.open("/ui/points/default/p/" + pt.ID + "/restore?what=instant")
	c.run(chromedp.WaitVisible("#r-nfs-address"))
	c.retype("#r-nfs-listen", "127.0.0.1:0")
	c.retype("#r-nfs-address", "127.0.0.1")
	c.shot("restore-instant-vsphere") // before the Chdir: axe-core is read from a relative path

	id := pt.ID[:8]
	work := t.TempDir()
	t.Chdir(work)
	export := filepath.Join(l.vars["COFFER_STATE_DIR"], "instant", id, "export")
	if err := os.Symlink(export, filepath.Join(work, "coffer-instant-"+id)); err != nil {
		t.Fatal(err)
	}
	c.clickAway("#restore-start")
	if loc := c.location(); !strings.HasSuffix(loc, "/ui/restore#session-"+id) {
		t.Fatalf("the instant recovery opened %s", loc)
	}
	c.waitText("#session-"+id, "VM running")
	var ss []api.InstantSession
	if code := l.get(l.adminToken(), "/api/v1/instant", &ss); code != 200 || len(ss) != 1 || ss[0].Platform != "vsphere" ||
		ss[0].NFSAddress != "127.0.0.1" || ss[0].Domain != pt.VM+"-instant" {
		t.Fatalf("instant-list (%d): %+v", code, ss)
	}
	if state, mounted := vcInstant(t, vc, pt.VM+"-instant", "coffer-instant-"+id); state != types.VirtualMachinePowerStatePoweredOn || !mounted {
		t.Fatalf("after the start: VM %q, export mounted %v", state, mounted)
	}
	c.run(chromedp.Click("#discard-" + id))
	c.waitText("#instant-action", "is discarded")
	if state, mounted := vcInstant(t, vc, pt.VM+"-instant", "coffer-instant-"+id); state != "" || mounted {
		t.Fatalf("after the discard: VM %q, export mounted %v", state, mounted)
	}
}

// vcInstant is the power state of the VM called name ("" if none is
// registered) and whether datastore ds is mounted.
func vcInstant(t *testing.T, vc *vclab.Lab, name, ds string) (types.VirtualMachinePowerState, bool) {
	var vms []mo.VirtualMachine
	vc.Retrieve(t.Context(), "VirtualMachine", []string{"name", "runtime.powerState"}, &vms)
	var state types.VirtualMachinePowerState
	for _, m := range vms {
		if m.Name == name {
			state = m.Runtime.PowerState
		}
	}
	var dss []mo.Datastore
	vc.Retrieve(t.Context(), "Datastore", []string{"name"}, &dss)
	return state, slices.ContainsFunc(dss, func(d mo.Datastore) bool { return d.Name == ds })
}
