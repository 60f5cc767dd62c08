package libvirt_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
)

// TestRestoreOntoTheOriginal writes a point back onto the domain it was
// taken from. A running domain is refused. A restore aborted, or killed,
// before its renames leaves the disks as they were; one killed during its
// renames is finished by the next start's cleanup. A finished restore
// leaves the domain's definition, UUID and file owners as they were, its
// disks byte for byte the point's, and no coffer checkpoint (the next
// backup is full); the guest boots and finds its workload consistent.
func TestRestoreOntoTheOriginal(t *testing.T) {
	l := startLab(t)
	full, err := l.backup("a", "full", hypervisor.CrashConsistent)
	if err != nil {
		t.Fatal(err)
	}
	var cfg hypervisor.VMConfig
	if err := json.Unmarshal(full.VMConfig, &cfg); err != nil {
		t.Fatal(err)
	}
	l.waitWrites(2) // the disks move on from the point
	onto := func() (hypervisor.NewVM, error) {
		return l.conn.CreateVM(l.ctx, cfg, hypervisor.NewVMOptions{ReplaceExisting: true})
	}
	if _, err := onto(); err == nil || !strings.Contains(err.Error(), "shut it down first") {
		t.Fatalf("onto the running domain: %v", err)
	}
	checkpoints := l.checkpoints()
	if len(checkpoints) == 0 {
		t.Fatal("the full backup left no checkpoint to drop")
	}
	if err := l.admin.DomainDestroy(l.dom); err != nil {
		t.Fatal(err)
	}
	vda, vdb := filepath.Join(l.dir, "vda.qcow2"), filepath.Join(l.dir, "vdb.raw")
	before := map[string][32]byte{vda: fileSum(t, vda), vdb: fileSum(t, vdb)}
	asBefore := func(what string) {
		t.Helper()
		for f, sum := range before {
			if fileSum(t, f) != sum {
				t.Fatalf("%s: %s changed", what, f)
			}
		}
		if m, _ := filepath.Glob(filepath.Join(l.dir, "*.coffer-restore*")); len(m) != 0 {
			t.Fatalf("%s: replacement files left: %v", what, m)
		}
		if ents, _ := os.ReadDir(filepath.Join(l.state, "journal")); len(ents) != 0 {
			t.Fatalf("%s: journal left: %v", what, ents)
		}
		if cps := l.checkpoints(); !slices.Equal(cps, checkpoints) {
			t.Fatalf("%s: checkpoints %v, want %v as they were", what, cps, checkpoints)
		}
	}
	writeDisk := func(nv hypervisor.NewVM, d repo.Disk) {
		t.Helper()
		src, err := restore.OpenDisk(l.ctx, l.repo("a"), d, 64)
		if err != nil {
			t.Fatal(err)
		}
		if err := nv.WriteDisk(l.ctx, d.Key, src); err != nil {
			t.Fatal(err)
		}
	}

	// Aborted after one disk: nothing of the domain changed.
	nv, err := onto()
	if err != nil {
		t.Fatal(err)
	}
	if nv.Ref().ID != domUUID {
		t.Fatalf("restoring onto %+v, want the original %s", nv.Ref(), domUUID)
	}
	writeDisk(nv, full.Disks[0])
	if err := nv.Abort(l.ctx); err != nil {
		t.Fatal(err)
	}
	asBefore("aborted")

	// Killed after one disk, before the renames: cleanup rolls back.
	nv, err = onto()
	if err != nil {
		t.Fatal(err)
	}
	writeDisk(nv, full.Disks[0])
	deadJournal(t, l.state, nil)
	left, err := l.conn.CleanupLeftovers(l.ctx)
	if err != nil || len(left) != 1 || !strings.Contains(left[0].Action, "as they were") {
		t.Fatalf("cleanup after a kill before the renames: %+v %v", left, err)
	}
	asBefore("killed before the renames")

	// The whole restore.
	nv, err = onto()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range full.Disks {
		writeDisk(nv, d)
	}
	if ents, _ := os.ReadDir(filepath.Join(l.state, "journal")); len(ents) != 0 {
		t.Fatalf("a finished restore keeps its journal: %v", ents)
	}
	if cps := l.checkpoints(); len(cps) != 0 {
		t.Fatalf("checkpoints %v kept: their bitmaps went with the old disk files", cps)
	}
	for _, d := range full.Disks {
		if !bytes.Equal(rawImage(t, l.dir, d.Key), l.restoreDisk(full, d.Key)) {
			t.Fatalf("%s does not hold the point", d.Key)
		}
	}
	if xml := l.virsh("dumpxml", domName); !strings.Contains(xml, domUUID) || !strings.Contains(xml, vda) || !strings.Contains(xml, vdb) {
		t.Fatalf("the domain's definition changed:\n%s", xml)
	}
	from := len(l.console())
	if err := nv.Start(l.ctx); err != nil { // as nobody, so the owners were kept
		t.Fatal(err)
	}
	at := l.waitConsole("COFFER CHECK OK", from)
	if strings.Contains(l.console()[from:at], "COFFER FAIL") {
		t.Fatalf("restored guest:\n%s", l.console()[from:])
	}
	l.waitConsole("COFFER READY", from)
	next, err := l.backup("a", "incremental", hypervisor.CrashConsistent)
	if err != nil {
		t.Fatal(err)
	}
	if next.Mode != "full" {
		t.Fatalf("the backup after a restore onto the original is %s, want full (the checkpoints went)", next.Mode)
	}

	// Killed during the renames (of the new full): cleanup finishes them
	// and forgets the checkpoints.
	if err := l.admin.DomainDestroy(l.dom); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(next.VMConfig, &cfg); err != nil {
		t.Fatal(err)
	}
	nv, err = onto()
	if err != nil {
		t.Fatal(err)
	}
	src, err := restore.OpenDisk(l.ctx, l.repo("a"), next.Disks[0], 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := nv.WriteDisk(l.ctx, next.Disks[0].Key, src); err != nil {
		t.Fatal(err)
	}
	journal := deadJournal(t, l.state, func(j map[string]any) { j["original"].(map[string]any)["renaming"] = true })
	if left, err = l.conn.CleanupLeftovers(l.ctx); err != nil || len(left) != 1 || !strings.Contains(left[0].Action, "finished") {
		t.Fatalf("cleanup after a kill during the renames: %+v %v", left, err)
	}
	if _, err := os.Stat(journal); !os.IsNotExist(err) {
		t.Fatalf("the journal is left: %v", err)
	}
	if cps := l.checkpoints(); len(cps) != 0 {
		t.Fatalf("checkpoints %v kept after the renames were finished", cps)
	}
	if !bytes.Equal(rawImage(t, l.dir, next.Disks[0].Key), l.restoreDisk(next, next.Disks[0].Key)) {
		t.Fatalf("%s does not hold the point after the renames were finished", next.Disks[0].Key)
	}
}

// deadJournal makes the one journal in the state directory look as if its
// coffer process had been killed, after edit changes it; it returns its
// path.
func deadJournal(t *testing.T, state string, edit func(map[string]any)) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(state, "journal", "restore-original-*.json"))
	if len(m) != 1 {
		t.Fatalf("journals %v, want the restore's", m)
	}
	b, err := os.ReadFile(m[0])
	if err != nil {
		t.Fatal(err)
	}
	var j map[string]any
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	j["coffer_pid"] = dead.Process.Pid
	if edit != nil {
		edit(j)
	}
	if b, err = json.Marshal(j); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	return m[0]
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// rawImage is a lab disk's content, by target.
func rawImage(t *testing.T, dir, key string) []byte {
	t.Helper()
	src := map[string]string{"vda": "vda.qcow2", "vdb": "vdb.raw"}[key]
	out := filepath.Join(t.TempDir(), key+".raw")
	if b, err := exec.Command("qemu-img", "convert", "-U", "-O", "raw", filepath.Join(dir, src), out).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
