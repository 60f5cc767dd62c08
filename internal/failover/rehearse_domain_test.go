package failover

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/replica"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestLeftoverCopyIsEndedBeforeItsOverlaysGo: a killed run's copy of a
// standby domain is ended through its connection before its overlays
// are removed. While it cannot be ended (the host unreachable), the run
// and the overlays are kept for the next clean-up; a record naming a
// directory that is not a test copy's removes nothing.
func TestLeftoverCopyIsEndedBeforeItsOverlaysGo(t *testing.T) {
	state, standby := t.TempDir(), t.TempDir()
	plant := func(run, copyDir string) {
		t.Helper()
		vmDir := filepath.Join(rehearsalRoot(state), run, "1.0")
		if err := os.MkdirAll(vmDir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := writeCopyRecord(vmDir, copyRecord{Host: "lv", Name: "coffer-test-" + run + "-web-1", Dir: copyDir}); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(copyDir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(copyDir, "vda.qcow2"), []byte("overlay"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	copyDir := filepath.Join(standby, copyDirPrefix+"run1")
	plant("run1", copyDir)
	notACopy := filepath.Join(standby, "keep")
	plant("run2", notACopy)

	var ended []string
	reachable := false
	destroy := func(_ context.Context, host, name string) error {
		if !reachable {
			return errors.New("connection refused")
		}
		ended = append(ended, host+"/"+name)
		return nil
	}
	RemoveLeftoversOf(context.Background(), state, destroy, nil)
	for _, p := range []string{filepath.Join(copyDir, "vda.qcow2"), filepath.Join(rehearsalRoot(state), "run1")} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("with its copy not ended, %s was removed: %v", p, err)
		}
	}
	reachable = true
	RemoveLeftoversOf(context.Background(), state, destroy, nil)
	if len(ended) != 1 || ended[0] != "lv/coffer-test-run1-web-1" {
		t.Fatalf("copies ended: %v", ended)
	}
	for _, p := range []string{copyDir, filepath.Join(rehearsalRoot(state), "run1")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s is left: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(notACopy, "vda.qcow2")); err != nil {
		t.Fatalf("a record naming another directory removed it: %v", err)
	}
}

// copiesThatCannotEnd starts test copies (nothing runs: the test reads
// only what Rehearse does around them) and cannot end them, as a host
// that became unreachable. While a copy starts it checks that the
// test's lock on its standby is held.
type copiesThatCannotEnd struct {
	dir    string
	locked bool
}

func (c *copiesThatCannotEnd) Host() string { return "lv" }
func (c *copiesThatCannotEnd) StartCopy(context.Context, hypervisor.VMConfig, hypervisor.TestCopy) error {
	l, err := replica.LockTest(c.dir)
	c.locked = errors.Is(err, replica.ErrTestRunning)
	if err == nil {
		_ = l.Close()
	}
	return nil
}
func (c *copiesThatCannotEnd) DestroyCopy(context.Context, string) error {
	return errors.New("connection refused")
}

// TestRehearsalThatCannotEndItsCopyFails: a test failover whose copy of
// a standby could not be ended does not pass (a VM may still run): its
// discard step says why. It held the standby's test lock while it ran
// and released it at its end.
func TestRehearsalThatCannotEndItsCopyFails(t *testing.T) {
	testutil.RequireBinary(t, "qemu-img")
	dir := t.TempDir()
	disk := filepath.Join(dir, "disk-vda-000001.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", disk, "1M").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	st := &replica.State{Seq: 1, Points: []replica.Point{{Seq: 1, BackupPoint: "p1", Disks: []replica.Disk{{Key: "vda", File: disk, Size: 1 << 20}}}}}
	if err := replica.SaveState(dir, st); err != nil {
		t.Fatal(err)
	}
	def, _ := json.Marshal(replica.Definition{Marker: replica.Marker, Seq: 1, BackupPoint: "p1", Config: hypervisor.VMConfig{Name: "web-1", Kind: "libvirt"}})
	if err := os.WriteFile(filepath.Join(dir, "standby.json"), def, 0o600); err != nil {
		t.Fatal(err)
	}
	copies := &copiesThatCannotEnd{dir: dir}
	plan := Plan{Name: "shop", Groups: []Group{{VMs: []VM{{Name: "web-1", Dir: dir, Copies: copies}}}}}
	rep, err := Rehearse(context.Background(), plan, RehearseOptions{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	last := rep.Steps[len(rep.Steps)-1]
	if rep.Passed || last.Name != "discard" || !strings.Contains(last.Error, "connection refused") {
		t.Fatalf("a test whose copy was not ended: passed %v, steps %+v", rep.Passed, rep.Steps)
	}
	if !copies.locked {
		t.Fatal("the standby was not locked while its copy started")
	}
	l, err := replica.LockTest(dir)
	if err != nil {
		t.Fatalf("the test's lock after its end: %v", err)
	}
	_ = l.Close()
}
