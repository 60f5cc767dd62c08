package libvirt_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore/nbdexport"
)

// instantLab is a lab whose point is being served over NBD on the
// connector's instant socket, the original domain stopped (both would
// write one console).
type instantLab struct {
	*lab
	point   *repo.Point
	cfg     hypervisor.VMConfig
	vdb     []byte // what the point's vdb holds
	socket  string
	stop    context.CancelFunc
	stopped chan error
}

func startInstantLab(t *testing.T) *instantLab {
	l := startLab(t)
	// vdb gets a pattern, so that its copy can be compared with something.
	pattern := make([]byte, 1<<20)
	rand.Read(pattern)
	f, err := os.OpenFile(filepath.Join(l.dir, "vdb.raw"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(pattern, 4<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	full, err := l.backup("a", "full", hypervisor.CrashConsistent)
	if err != nil {
		t.Fatal(err)
	}
	il := &instantLab{lab: l, point: full, vdb: l.restoreDisk(full, "vdb")}
	if !bytes.Equal(il.vdb[4<<20:5<<20], pattern) {
		t.Fatal("the point's vdb does not hold the pattern")
	}
	if err := json.Unmarshal(full.VMConfig, &il.cfg); err != nil {
		t.Fatal(err)
	}
	if err := l.admin.DomainDestroy(l.dom); err != nil {
		t.Fatal(err)
	}
	exports, names, err := nbdexport.Exports(l.ctx, l.repo("a"), full)
	if err != nil {
		t.Fatal(err)
	}
	il.socket = l.conn.InstantSocket(full.ID.Short())
	ln, err := nbdexport.Listen("unix", il.socket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(l.ctx)
	il.stop, il.stopped = cancel, make(chan error, 1)
	go func() { il.stopped <- nbdexport.Serve(ctx, ln, exports, names, nil) }()
	t.Cleanup(il.stopServing)
	return il
}

// stopServing ends coffer's NBD server.
func (il *instantLab) stopServing() {
	if il.stop != nil {
		il.stop()
		<-il.stopped
		il.stop = nil
	}
}

// start runs the point as domain name and waits for its workload to
// verify the disk it reads through the overlay from the backup.
func (il *instantLab) start(name string) hypervisor.InstantVM {
	il.t.Helper()
	sizes := map[string]int64{}
	for _, d := range il.point.Disks {
		sizes[d.Key] = d.Size
	}
	from := len(il.console())
	vm, err := il.conn.InstantStart(il.ctx, il.cfg, hypervisor.InstantOptions{Name: name, Socket: il.socket, Sizes: sizes})
	if err != nil {
		il.t.Fatalf("instant start: %v\n%s", err, il.d.Log())
	}
	if vm.Ref.ID == domUUID || vm.Ref.Name != name {
		il.t.Fatalf("instant domain %+v", vm.Ref)
	}
	at := il.waitConsole("COFFER CHECK OK", from)
	if strings.Contains(il.console()[from:at], "COFFER FAIL") {
		il.t.Fatalf("recovered guest:\n%s", il.console()[from:])
	}
	il.assertNoJournal()
	return vm
}

func (il *instantLab) assertNoJournal() {
	il.t.Helper()
	if ents, _ := os.ReadDir(filepath.Join(il.state, "journal")); len(ents) != 0 {
		il.t.Fatalf("journal left: %v", ents)
	}
}

// TestInstantRecoveryCommit runs a point as a new domain from coffer's NBD
// export, its guest verifies the disk it reads from the backup, and the
// commit moves it with libvirt's block copy onto files in the pool while it
// runs: afterwards it runs with coffer's server stopped, its disks are
// local files without a backing file, and they hold the point (plus what
// the recovered guest wrote since, each block of it intact).
func TestInstantRecoveryCommit(t *testing.T) {
	il := startInstantLab(t)
	vm := il.start("web-1-instant")
	xml := il.virsh("dumpxml", "web-1-instant")
	if !strings.Contains(xml, "protocol='nbd'") || !strings.Contains(xml, vm.Overlays["vda"]) || !strings.Contains(xml, "rerror_policy='stop'") {
		t.Fatalf("the instant domain does not run from overlays on the NBD export:\n%s", xml)
	}
	// A bad target is refused before anything is copied.
	if _, err := il.conn.InstantCommit(il.ctx, vm, "no-such-pool", "qcow2"); err == nil {
		t.Fatal("commit to a missing pool succeeded")
	}
	il.waitWrites(1) // the guest writes through the overlay while it is copied
	targets, err := il.conn.InstantCommit(il.ctx, vm, "images", "qcow2")
	if err != nil {
		t.Fatalf("commit: %v\n%s", err, il.d.Log())
	}
	il.assertNoJournal()
	il.stopServing()
	il.waitWrites(2) // still running, with nothing served
	dom, err := il.admin.DomainLookupByName("web-1-instant")
	if err != nil {
		t.Fatal(err)
	}
	if st, _, err := il.admin.DomainGetState(dom, 0); err != nil || golibvirt.DomainState(st) != golibvirt.DomainRunning {
		t.Fatalf("after the commit the domain is in state %d (%v)", st, err)
	}
	xml = il.virsh("dumpxml", "web-1-instant")
	inactive := il.virsh("dumpxml", "--inactive", "web-1-instant")
	if strings.Contains(xml+inactive, "nbd") || strings.Contains(xml+inactive, ".instant.qcow2") {
		t.Fatalf("the committed domain still uses the backup:\n%s", xml)
	}
	for key, p := range targets {
		if filepath.Dir(p) != il.dir || !strings.Contains(xml, "file='"+p+"'") || !strings.Contains(inactive, "file='"+p+"'") {
			t.Fatalf("disk %s committed to %s:\n%s", key, p, xml)
		}
		out, err := exec.Command("qemu-img", "info", "-U", "--output=json", p).CombinedOutput()
		if err != nil {
			t.Fatalf("%v %s", err, out)
		}
		if strings.Contains(string(out), "backing") {
			t.Fatalf("%s has a backing file: %s", p, out)
		}
		if _, err := os.Stat(vm.Overlays[key]); !os.IsNotExist(err) {
			t.Fatalf("overlay %s is still there (%v)", vm.Overlays[key], err)
		}
	}
	// The contents, read with the domain paused.
	if err := il.admin.DomainSuspend(dom); err != nil {
		t.Fatal(err)
	}
	if got := il.readImage(targets["vdb"]); !bytes.Equal(got, il.vdb) {
		t.Fatal("the committed vdb differs from the point's")
	}
	want, got := il.restoreDisk(il.point, "vda"), il.readImage(targets["vda"])
	if len(got) != len(want) {
		t.Fatalf("committed vda has %d bytes, the point's %d", len(got), len(want))
	}
	rep := il.checkWorkload(got)
	pointRep := il.checkWorkload(want)
	changed := 0
	for off := 0; off < len(want); off += guestvm.BlockSize {
		if bytes.Equal(got[off:off+guestvm.BlockSize], want[off:off+guestvm.BlockSize]) {
			continue
		}
		// Only the recovered guest's own writes may differ: intact blocks
		// newer than anything in the point.
		seq, ok := guestvm.CheckBlock(got[off:off+guestvm.BlockSize], uint64(off/guestvm.BlockSize))
		if !ok || seq <= pointRep.MaxSeq {
			t.Fatalf("committed vda block %d differs from the point's and is not a later write of the guest", off/guestvm.BlockSize)
		}
		changed++
	}
	if changed == 0 || rep.MaxSeq <= pointRep.MaxSeq {
		t.Fatalf("the guest's writes after recovery are not in the committed vda (%d blocks changed)", changed)
	}
}

// readImage reads a disk image as raw bytes past QEMU's lock.
func (il *instantLab) readImage(p string) []byte {
	il.t.Helper()
	out := filepath.Join(il.t.TempDir(), "img.raw")
	if b, err := exec.Command("qemu-img", "convert", "-U", "-O", "raw", p, out).CombinedOutput(); err != nil {
		il.t.Fatalf("%v %s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		il.t.Fatal(err)
	}
	return b
}

// TestInstantRecoveryDiscard: discarding stops and undefines the recovered
// domain and removes its overlays; the original is untouched.
func TestInstantRecoveryDiscard(t *testing.T) {
	il := startInstantLab(t)
	vm := il.start("web-1-instant")
	if running, err := il.conn.InstantRunning(il.ctx, vm.Ref); err != nil || !running {
		t.Fatalf("running %v %v", running, err)
	}
	// A second domain of the same name is refused before anything exists.
	if _, err := il.conn.InstantStart(il.ctx, il.cfg, hypervisor.InstantOptions{Name: "web-1-instant", Socket: il.socket}); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("second instant domain of one name: %v", err)
	}
	if err := il.conn.InstantDiscard(il.ctx, vm); err != nil {
		t.Fatal(err)
	}
	if _, err := il.admin.DomainLookupByName("web-1-instant"); err == nil {
		t.Fatal("the discarded domain is still defined")
	}
	if m, _ := filepath.Glob(filepath.Join(il.dir, "web-1-instant*")); len(m) != 0 {
		t.Fatalf("discard left %v", m)
	}
	if running, err := il.conn.InstantRunning(il.ctx, vm.Ref); err != nil || running {
		t.Fatalf("running after discard %v %v", running, err)
	}
	if _, err := il.admin.DomainLookupByName(domName); err != nil {
		t.Fatalf("the original domain: %v", err)
	}
	il.assertNoJournal()
}
