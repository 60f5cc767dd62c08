package console_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/testutil"
	"github.com/coffer-backup/coffer/internal/testutil/vclab"
)

// TestConsoleRestoreOntoAnotherPlatform: a vSphere VM (vcsim) backed
// up; the restore wizard's "As a new VM" offers the configuration's
// libvirt connection (a libvirtd the test starts) as another platform
// beside a directory of the server (a QEMU VM) and its own connection,
// shows how the VM maps onto it before anything starts (its disk from
// VMware Paravirtual SCSI to the same controller under QEMU, what the
// guest needs), and the restore it starts defines the domain, its disk
// the point's bytes.
func TestConsoleRestoreOntoAnotherPlatform(t *testing.T) {
	l := newLab(t)
	d := testutil.StartLibvirtd(t)
	vc := vclab.New(t, vclab.Start(t, 1, 0))
	vm := vc.VMs[0]
	disk := vc.Disk(vm.Name)
	backedUp := make([]byte, disk.Size)
	_, _ = rand.Read(backedUp[:disk.Size/2])
	vc.WriteFlat(disk, backedUp)
	pool := filepath.Join(d.Dir, "images")
	if err := errors.Join(os.MkdirAll(pool, 0o755), d.ChownAll(pool)); err != nil {
		t.Fatal(err)
	}
	virsh := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("virsh", append([]string{"-c", d.URI}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("virsh %v: %v %s", args, err, out)
		}
		return string(out)
	}
	virsh("pool-create-as", "images", "dir", "--target", pool)
	l.config(vc.Connection("vc", filepath.Join(l.dir, "vc.password")) + fmt.Sprintf(`  - name: kvm
    kind: libvirt
    options: {uri: %q, state-dir: %q}
policies:
  - name: p
    connection: vc
    select: {names: [%s]}
`, d.URI, filepath.Join(d.Dir, "st"), vm.Name))
	l.coffer("init")
	l.coffer("run", "p")

	l.start()
	c := l.chrome()
	c.firstRun()
	var points []api.BackupPoint
	if code := l.get(l.adminToken(), "/api/v1/repositories/default/points", &points); code != 200 || len(points) != 1 {
		t.Fatalf("points: %d %+v", code, points)
	}
	c.open("/ui/points/default/p/" + points[0].ID + "/restore")
	c.run(chromedp.Click("#what-vm"), chromedp.WaitVisible("#r-targets"))
	if c.count("#target-dir") != 1 || c.count("#target-vc") != 1 {
		t.Fatal("the wizard does not offer a directory of the server (QEMU) and the VM's own connection")
	}
	// Into a directory, the default: as a QEMU VM, mapped.
	c.waitText("#r-mapping", "How a vsphere VM maps onto qemu")
	c.waitText("#target-kvm", "another platform")
	// The link reloads the same page with the connection chosen (the page
	// keeps #target-kvm, so clickAway cannot tell the new page).
	var href string
	var found bool
	c.run(chromedp.AttributeValue("#target-kvm", "href", &href, &found))
	if !found || href != "?what=vm&connection=kvm#how-h" {
		t.Fatalf("the libvirt connection's link: %q", href)
	}
	c.open("/ui/points/default/p/" + points[0].ID + "/restore" + href)
	c.waitText("#r-mapping", "How a vsphere VM maps onto libvirt")
	c.waitText("#r-mapping", "sda on VMware Paravirtual SCSI")
	c.waitText("#r-needs", "does not record the guest's operating system")
	if list := virsh("list", "--all", "--name"); strings.TrimSpace(list) != "" {
		t.Fatalf("showing the mapping defined a domain:\n%s", list)
	}
	c.retype("#r-name", "app-kvm")
	c.retype("#r-datastore", "images")
	c.shot("restore-cross-platform")
	c.clickAway("#restore-start")
	if loc := c.location(); !strings.Contains(loc, "/ui/tasks/") {
		t.Fatalf("the restore opened %s, not its task", loc)
	}
	c.waitText("#task-status", "success")
	c.waitText("#log", "restoring a vsphere VM as a libvirt VM")
	if xml := virsh("dumpxml", "app-kvm"); !strings.Contains(xml, "model='vmpvscsi'") {
		t.Fatalf("the restored domain:\n%s", xml)
	}
	raw := filepath.Join(l.dir, "restored.raw")
	if out, err := exec.Command("qemu-img", "convert", "-O", "raw", filepath.Join(pool, "app-kvm-sda.qcow2"), raw).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if b, err := os.ReadFile(raw); err != nil || !bytes.Equal(b, backedUp) {
		t.Fatalf("the domain's disk differs from the point (%v)", err)
	}
}
