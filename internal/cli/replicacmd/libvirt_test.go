package replicacmd_test

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/replica"
)

// TestStandbyIsALibvirtDomain: a replication whose DR host is a libvirt
// connection (the test's libvirtd) defines each standby there as a domain
// of its own, web-1-standby, beside web-1: shut off, autostart off, its
// disk naming the file only a failover creates, the same domain (UUID)
// redefined by each run. A start by mistake fails for want of that disk
// and leaves the domain shut off, and every restore point unwritten: after
// it the newest point still equals the paused source (qemu-img compare),
// as it did after each of two runs. The host's inventory leaves the
// standby out: it is no VM to back up.
func TestStandbyIsALibvirtDomain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	g := clitest.StartLibvirtGuest(t, ctx)
	at := g.Wait("COFFER READY", 0)
	e := clitest.NewEnv(t)
	e.Must("init")
	standbys := filepath.Join(e.Dir, "dr")
	e.Config(fmt.Sprintf(`
state-dir: %s
connections:
  - {name: lv, kind: libvirt, options: {uri: %q, state-dir: %s}}
policies:
  - {name: web, connection: lv, select: {names: [web-1]}}
replications:
  - {name: web-dr, vms: [web-1], connection: lv, directory: %s, keep: 2}
`, filepath.Join(e.Dir, "state"), g.D.URI, filepath.Join(g.D.Dir, "st"), standbys))
	admin := libvirtAdmin(t, g.D.URI)
	dir := filepath.Join(standbys, "web-1")

	uuid := ""
	for run := range 2 {
		if run > 0 {
			g.Virsh("resume", "web-1")
			at = g.Wait("COFFER WROTE", at)
		}
		g.Virsh("suspend", "web-1")
		e.Must("run", "web")
		doc := clitest.Decode[api.ReplicationRun](t, e.Must("replicas", "run", "web-dr", "--json"))
		if len(doc.VMs) != 1 || doc.VMs[0].Error != "" {
			t.Fatalf("run %d: %+v", run+1, doc)
		}
		compareNewest(t, dir, g.Disk)
		dom := standbyDomain(t, admin, dir)
		if got := formatUUID(dom.UUID); uuid != "" && got != uuid {
			t.Fatalf("run %d redefined the standby as another domain: %s, then %s", run+1, uuid, got)
		} else {
			uuid = got
		}
	}

	// A copy kept by the replication, not a VM to back up.
	if vms := clitest.VMsJSON(t, e); len(vms) != 1 || vms[0].VM != "web-1" {
		t.Fatalf("the DR host's inventory: %+v, want web-1 alone", vms)
	}
	dom := standbyDomain(t, admin, dir)
	err := admin.DomainCreate(dom)
	if err == nil {
		t.Fatal("the standby domain started though no failover created its disk")
	}
	if !strings.Contains(err.Error(), replica.ActiveFile(dir, "vda")) {
		t.Errorf("the refused start does not name the missing disk: %v", err)
	}
	if st, _, err := admin.DomainGetState(dom, 0); err != nil || golibvirt.DomainState(st) != golibvirt.DomainShutoff {
		t.Fatalf("after the refused start the standby is in state %d (%v), not shut off", st, err)
	}
	compareNewest(t, dir, g.Disk)
	g.Virsh("resume", "web-1")
}

// standbyDomain checks the standby's domain as the DR host holds it: shut
// off, never autostarted, its disk the file a failover creates.
func standbyDomain(t *testing.T, admin *golibvirt.Libvirt, dir string) golibvirt.Domain {
	t.Helper()
	dom, err := admin.DomainLookupByName("web-1-standby")
	if err != nil {
		t.Fatalf("the standby's domain: %v", err)
	}
	if st, _, err := admin.DomainGetState(dom, 0); err != nil || golibvirt.DomainState(st) != golibvirt.DomainShutoff {
		t.Fatalf("the standby domain is in state %d (%v), not shut off", st, err)
	}
	if auto, err := admin.DomainGetAutostart(dom); err != nil || auto != 0 {
		t.Fatalf("the standby domain's autostart: %d %v", auto, err)
	}
	doc, err := admin.DomainGetXMLDesc(dom, golibvirt.DomainXMLInactive)
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
	if len(x.Disks) != 1 || x.Disks[0].Source.File != replica.ActiveFile(dir, "vda") {
		t.Fatalf("the standby domain's disks: %+v, want only %s", x.Disks, replica.ActiveFile(dir, "vda"))
	}
	if _, err := os.Stat(x.Disks[0].Source.File); !os.IsNotExist(err) {
		t.Fatalf("the standby's active disk exists before any failover: %v", err)
	}
	return dom
}

// compareNewest wants the standby's newest point to equal the paused
// guest's disk.
func compareNewest(t *testing.T, dir, disk string) {
	t.Helper()
	st, err := replica.LoadState(dir)
	if err != nil || st.Newest() == nil {
		t.Fatalf("the standby's record: %+v %v", st, err)
	}
	if out, err := exec.Command("qemu-img", "compare", "-U", "-f", "qcow2", "-F", "qcow2", st.Newest().Disks[0].File, disk).CombinedOutput(); err != nil {
		t.Fatalf("the standby's point %d differs from the paused guest's disk: %v %s", st.Newest().Seq, err, out)
	}
}

// libvirtAdmin is the test's own connection to the daemon at uri.
func libvirtAdmin(t *testing.T, uri string) *golibvirt.Libvirt {
	t.Helper()
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := golibvirt.ConnectToURI(u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Disconnect() }) // the daemon stops after
	return admin
}

func formatUUID(u golibvirt.UUID) string {
	b, _ := json.Marshal(u)
	return string(b)
}
