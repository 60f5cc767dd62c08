package replicacmd_test

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/replica"
)

// TestFailoverStartsTheStandbyDomain: a failover of a standby kept as a
// libvirt domain creates its active disk, a qcow2 overlay above the point
// chosen (the older of two, which differ), and starts the domain through
// libvirt. Right after the start (suspended before the guest's workload
// writes) the active disk equals that point and not the newer one, and the
// guest, resumed, checks its self-verifying blocks (COFFER CHECK OK) on
// it. While it runs, a second failover and a start by hand are refused. A
// failback stops the domain and removes the active disk: the domain is
// shut off and cannot start by accident again. Before the source is lost,
// test failovers of the standby run copies of its domain and leave
// nothing (testFailoverOfTheStandbyDomain).
func TestFailoverStartsTheStandbyDomain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	g := clitest.StartLibvirtGuest(t, ctx)
	at := g.Wait("COFFER READY", 0)
	e := clitest.NewEnv(t)
	e.Must("init")
	standbys := filepath.Join(g.D.Dir, "dr") // the daemon's user reaches it
	e.Config(fmt.Sprintf(`
state-dir: %s
connections:
  - {name: lv, kind: libvirt, options: {uri: %q, state-dir: %s}}
policies:
  - {name: web, connection: lv, select: {names: [web-1]}}
replications:
  - {name: web-dr, vms: [web-1], connection: lv, directory: %s, keep: 2}
failover-plans:
  - {name: shop, replication: web-dr, groups: [{vms: [{name: web-1}]}]}
  - {name: rehearse, replication: web-dr, groups: [{vms: [{name: web-1, script: %s}]}]}
  - {name: drill, replication: web-dr, groups: [{vms: [{name: web-1, script: %s}]}]}
`, filepath.Join(e.Dir, "state"), g.D.URI, filepath.Join(g.D.Dir, "st"), standbys, testScripts(t, e.Dir, "check"), testScripts(t, e.Dir, "kill")))
	admin := libvirtAdmin(t, g.D.URI)
	dir := filepath.Join(standbys, "web-1")
	for run := range 2 {
		if run > 0 {
			g.Virsh("resume", "web-1")
			at = g.Wait("COFFER WROTE", at)
		}
		g.Virsh("suspend", "web-1")
		e.Must("run", "web")
		e.Must("replicas", "run", "web-dr")
	}
	st, err := replica.LoadState(dir)
	if err != nil || len(st.Points) != 2 {
		t.Fatalf("the standby's record: %+v %v", st, err)
	}
	older, newer := st.Points[0].Disks[0].File, st.Points[1].Disks[0].File

	// The DR host's user owns the standbys.
	if err := g.D.ChownAll(standbys); err != nil {
		t.Fatal(err)
	}
	testFailoverOfTheStandbyDomain(t, e, g, dir)

	// The source's site is lost.
	g.Virsh("destroy", "web-1")
	console := filepath.Join(g.D.Dir, "vm", "console.log") // the standby's too, by its definition
	if err := os.Remove(console); err != nil {
		t.Fatal(err)
	}
	e.Must("failover", "run", "shop", "--seq", strconv.Itoa(st.Points[0].Seq))
	g.Virsh("suspend", "web-1-standby")
	active := replica.ActiveFile(dir, "vda")
	dom := runningStandby(t, admin, active)
	if b := backingFile(t, active); b != older {
		t.Fatalf("the active disk's backing file is %s, want the chosen point's %s", b, older)
	}
	if out, err := exec.Command("qemu-img", "compare", "-U", active, older).CombinedOutput(); err != nil {
		t.Fatalf("the failed-over disk differs from the chosen point: %v %s", err, out)
	}
	if exec.Command("qemu-img", "compare", "-U", active, newer).Run() == nil {
		t.Fatal("the two points are equal: the test cannot tell which one the failover chose")
	}
	g.Virsh("resume", "web-1-standby")
	g.Wait("COFFER CHECK OK", 0)

	if code, out, errOut := e.Run("failover", "run", "shop"); code == 0 || !strings.Contains(out+errOut, "already failed over") {
		t.Fatalf("a second failover while the standby runs: exit %d\n%s%s", code, out, errOut)
	}
	if err := admin.DomainCreate(dom); err == nil {
		t.Fatal("the running standby domain started a second time")
	}
	runningStandby(t, admin, active)

	e.Must("failover", "failback", "shop")
	if st, _, err := admin.DomainGetState(dom, 0); err != nil || golibvirt.DomainState(st) != golibvirt.DomainShutoff {
		t.Fatalf("after the failback the standby domain is in state %d (%v), not shut off", st, err)
	}
	if _, err := os.Stat(active); !os.IsNotExist(err) {
		t.Fatalf("the failback left the active disk: %v", err)
	}
	if err := admin.DomainCreate(dom); err == nil {
		t.Fatal("the standby domain started after the failback though its active disk is gone")
	}
}

// runningStandby wants the standby's domain active, on the active disk.
func runningStandby(t *testing.T, admin *golibvirt.Libvirt, active string) golibvirt.Domain {
	t.Helper()
	dom, err := admin.DomainLookupByName("web-1-standby")
	if err != nil {
		t.Fatal(err)
	}
	if st, _, err := admin.DomainGetState(dom, 0); err != nil || golibvirt.DomainState(st) == golibvirt.DomainShutoff {
		t.Fatalf("the failed-over standby domain is in state %d (%v)", st, err)
	}
	doc, err := admin.DomainGetXMLDesc(dom, 0)
	if err != nil {
		t.Fatal(err)
	}
	var x struct {
		Disks []struct {
			Source struct {
				File string `xml:"file,attr"`
			} `xml:"source"`
		} `xml:"devices>disk"`
	}
	if err := xml.Unmarshal([]byte(doc), &x); err != nil {
		t.Fatal(err)
	}
	if len(x.Disks) != 1 || x.Disks[0].Source.File != active {
		t.Fatalf("the running standby's disks: %+v, want %s", x.Disks, active)
	}
	return dom
}

// backingFile is the backing file qemu-img reports for a qcow2 image.
func backingFile(t *testing.T, img string) string {
	t.Helper()
	out, err := exec.Command("qemu-img", "info", "-U", "--output=json", img).Output()
	if err != nil {
		t.Fatalf("qemu-img info %s: %v", img, err)
	}
	var info struct {
		Backing string `json:"full-backing-filename"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatal(err)
	}
	return info.Backing
}
