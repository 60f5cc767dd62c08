package libvirt_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/restore"
)

// TestRestoreAsNewDomain restores a point as a new domain in the pool
// (new name, UUID, qcow2 disks from the repository), boots it, and the
// guest finds its workload's disk consistent. A restore that fails halfway
// leaves neither the domain nor its files.
func TestRestoreAsNewDomain(t *testing.T) {
	l := startLab(t)
	full, err := l.backup("a", "full", hypervisor.CrashConsistent)
	if err != nil {
		t.Fatal(err)
	}
	var cfg hypervisor.VMConfig
	if err := json.Unmarshal(full.VMConfig, &cfg); err != nil {
		t.Fatal(err)
	}
	r := l.repo("a")
	create := func(name string) hypervisor.NewVM {
		nv, err := l.conn.CreateVM(l.ctx, cfg, hypervisor.NewVMOptions{Name: name, Datastore: "images"})
		if err != nil {
			t.Fatal(err)
		}
		return nv
	}
	// Halfway: one disk written, then aborted.
	half := create("web-1-half")
	src, err := restore.OpenDisk(l.ctx, r, full.Disks[0], 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := half.WriteDisk(l.ctx, full.Disks[0].Key, src); err != nil {
		t.Fatal(err)
	}
	if err := half.Abort(l.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.admin.DomainLookupByName("web-1-half"); err == nil {
		t.Fatal("the aborted restore's domain is still defined")
	}
	if m, _ := filepath.Glob(filepath.Join(l.dir, "web-1-half*")); len(m) != 0 {
		t.Fatalf("the aborted restore left %v", m)
	}

	nv := create("web-1-copy")
	if nv.Ref().ID == domUUID {
		t.Fatal("the restored domain kept the original's UUID")
	}
	for _, d := range full.Disks {
		src, err := restore.OpenDisk(l.ctx, r, d, 64)
		if err != nil {
			t.Fatal(err)
		}
		if err := nv.WriteDisk(l.ctx, d.Key, src); err != nil {
			t.Fatal(err)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(l.state, "journal")); len(ents) != 0 {
		t.Fatalf("a finished restore keeps its journal: %v", ents)
	}
	xml := l.virsh("dumpxml", "web-1-copy")
	if !strings.Contains(xml, filepath.Join(l.dir, "web-1-copy-vda.qcow2")) || strings.Contains(xml, domUUID) {
		t.Fatalf("restored definition:\n%s", xml)
	}
	// The original stops (both write one console); the copy boots and its
	// workload checks the restored disk.
	if err := l.admin.DomainDestroy(l.dom); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"web-1-copy-vda.qcow2", "web-1-copy-vdb.qcow2"} {
		l.d.Chown(filepath.Join(l.dir, f))
	}
	from := len(l.console())
	if err := nv.Start(l.ctx); err != nil {
		t.Fatal(err)
	}
	at := l.waitConsole("COFFER CHECK OK", from)
	if strings.Contains(l.console()[from:at], "COFFER FAIL") {
		t.Fatalf("restored guest:\n%s", l.console()[from:])
	}
	// A name in use is refused before anything is created.
	if _, err := l.conn.CreateVM(l.ctx, cfg, hypervisor.NewVMOptions{Name: domName, Datastore: "images"}); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("restore over an existing name: %v", err)
	}
}
