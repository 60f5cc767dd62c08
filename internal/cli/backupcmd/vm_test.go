package backupcmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"

	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/qmp"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestRunPolicyOnQEMUGuests drives real QEMU guests through the job
// engine: a policy over a qemu connection, run twice (full, then
// incremental from the dirty bitmaps), recorded in the SQLite catalog,
// and the latest point restored and checked block by block.
func TestRunPolicyOnQEMUGuests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	e := clitest.NewEnv(t)
	vms := clitest.BootWriters(t, ctx, e.Dir, 2)
	e.Must("init")
	e.Config(fmt.Sprintf(`
state-dir: %s
connections:
  - name: kvm1
    kind: qemu
    options: {sockets: ["%s"], host: kvm1}
limits: {tasks: 2}
policies:
  - name: nightly
    connection: kvm1
    select: {names: ["web-*"]}
    snapshot: quiesced
    retention: {keep-last: 5}
`, filepath.Join(e.Dir, "state"), filepath.Join(e.Dir, "vm-*", "qmp.sock")))

	inv := clitest.VMsJSON(t, e)
	if len(inv) != 2 {
		t.Fatalf("vms: %+v", inv)
	}
	for _, vm := range inv {
		if vm.Host != "kvm1" || vm.ProvisionedBytes != 32<<20 || len(vm.Policies) != 1 || vm.Covered || !vm.GuestAgent {
			t.Fatalf("inventory before any backup: %+v", vm)
		}
	}

	runOnce := func(wantMode string) api.Job {
		t.Helper()
		var res api.Job
		out := e.Must("run", "nightly", "--json")
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if res.Status != "success" || len(res.Tasks) != 2 {
			t.Fatalf("run: %+v", res)
		}
		for _, task := range res.Tasks {
			if task.Mode != wantMode || task.PointID == "" || task.SnapshotMode != "quiesced" || task.SnapshotModeAchieved != "quiesced" {
				t.Fatalf("task %+v, want a %s backup", task, wantMode)
			}
		}
		return res
	}
	full := runOnce("full")
	for _, vm := range vms {
		if _, _, err := vm.WaitConsoleFrom(ctx, vm.Mark(), "COFFER WROTE"); err != nil {
			t.Fatal(err)
		}
	}
	inc := runOnce("incremental")
	for i := range inc.Tasks {
		if inc.Tasks[i].ReadBytes >= full.Tasks[i].ReadBytes {
			t.Errorf("incremental read %d bytes, the full %d: dirty bitmaps unused", inc.Tasks[i].ReadBytes, full.Tasks[i].ReadBytes)
		}
	}

	var points []api.BackupPoint
	if err := json.Unmarshal([]byte(e.Must("catalog", "points", "--json")), &points); err != nil || len(points) != 4 {
		t.Fatalf("catalog points: %v %v", points, err)
	}
	for _, p := range points { // the guest agents answered
		if p.SnapshotMode != "quiesced" || p.SnapshotModeAchieved != "quiesced" {
			t.Fatalf("catalog point %+v", p)
		}
	}
	for _, vm := range clitest.VMsJSON(t, e) {
		if !vm.Covered || vm.LastMode != "incremental" {
			t.Fatalf("inventory after two runs: %+v", vm)
		}
	}
	// Nothing of the sessions stays on the VMs: no fleecing node, export
	// or temporary bitmap (the connector's own tests inspect QMP; here the
	// state directory's journals must be gone).
	if left, _ := os.ReadDir(filepath.Join(e.Dir, "state", "qemu", "journal")); len(left) != 0 {
		t.Fatalf("journals left: %v", left)
	}

	restored := filepath.Join(e.Dir, "restored.raw")
	e.Must("restore", inc.Tasks[0].PointID, "--to", restored)
	f, err := os.Open(restored)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	rep, err := guestvm.CheckDisk(f, fi.Size())
	if err != nil || rep.Base != 64 {
		t.Fatalf("restored disk: %+v %v", rep, err)
	}
	if out := e.Must("jobs"); !strings.Contains(out, "nightly") {
		t.Fatalf("jobs: %s", out)
	}
}

// TestDemo runs the quick start's first command as a user would.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("boots two VMs")
	}
	testutil.RequireBinary(t, "qemu-system-x86_64")
	if _, err := guestvm.Build(context.Background()); err == guestvm.ErrNoAssets && !testutil.Strict() {
		t.Skip(err)
	}
	e := clitest.NewEnv(t)
	dir := filepath.Join(e.Dir, "demo")
	out := e.Must("demo", "--dir", dir)
	// It ends saying how to see its results in the console: --serve, or
	// the server over the directory it kept.
	for _, want := range []string{"COFFER CHECK OK", "demo finished", "incremental", "coffer demo --serve",
		"--catalog " + filepath.Join(dir, "catalog.db") + " server --insecure-http --listen 127.0.0.1:"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

// TestRestoreAsNewVM restores a running guest's backup as a second VM
// next to the original: qcow2 disks, the recorded machine with a new
// name, UUID and monitor; its guest verifies the disk and keeps writing.
func TestRestoreAsNewVM(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := clitest.NewEnv(t)
	vm := clitest.BootWriters(t, ctx, e.Dir, 1)[0]
	e.Must("init")
	e.Must("backup", "vm", vm.QMPPath)

	target := filepath.Join(e.Dir, "restored-vm")
	var res api.RestoredVM
	if err := json.Unmarshal([]byte(e.Must("restore", "vm", "latest", "--to", target, "--start", "--json")), &res); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = qemu.Quit(context.Background(), res.QMPSocket) })
	if !res.Started || res.VM != "web-0-restored" || len(res.Disks) != 1 || !strings.HasSuffix(res.Disks[0], ".qcow2") {
		t.Fatalf("restore vm: %+v", res)
	}
	pos := clitest.WaitFile(ctx, t, res.Console, 0, "COFFER CHECK OK base=64")
	clitest.WaitFile(ctx, t, res.Console, pos, "COFFER WROTE")
	cl, err := qmp.Dial(ctx, res.QMPSocket)
	if err != nil {
		t.Fatal(err)
	}
	var uuid struct {
		UUID string `json:"UUID"`
	}
	if err := cl.Execute(ctx, "query-uuid", nil, &uuid); err != nil || uuid.UUID != res.VMID || uuid.UUID == "6b1d3c0e-8f53-4b8e-9a51-0d1c2b3a4f50" {
		t.Fatalf("restored VM's UUID %q (recorded %q): %v", uuid.UUID, res.VMID, err)
	}
	cl.Close()
	// The original kept running on its own disk.
	if _, _, err := vm.WaitConsoleFrom(ctx, vm.Mark(), "COFFER WROTE"); err != nil {
		t.Fatal(err)
	}
	// Restoring again into the same directory never overwrites.
	if code, _, _ := e.Run("restore", "vm", "latest", "--to", target); code == 0 {
		t.Fatal("a second restore into the same directory succeeded")
	}
	// A disk restored as qcow2 holds the same bytes as one restored raw.
	e.Must("restore", "latest", "--to", filepath.Join(e.Dir, "d.raw"))
	e.Must("restore", "latest", "--format", "qcow2", "--to", filepath.Join(e.Dir, "d.qcow2"))
	if out, err := exec.Command("qemu-img", "compare", "-f", "raw", "-F", "qcow2", filepath.Join(e.Dir, "d.raw"), filepath.Join(e.Dir, "d.qcow2")).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img compare: %v %s", err, out)
	}
}

// TestWithMemoryBackupResumes backs up a running guest with its memory
// state and restores it as a new VM that resumes where the guest was (it
// keeps writing without booting again) on the disks of the same instant.
func TestWithMemoryBackupResumes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := clitest.NewEnv(t)
	e.Vars["COFFER_STATE_DIR"] = filepath.Join(e.Dir, "state")
	vm := clitest.BootWriters(t, ctx, e.Dir, 1)[0]
	e.Must("init")
	e.Must("backup", "vm", vm.QMPPath, "--snapshot-mode", "with-memory")
	// The original keeps running after the save.
	if _, _, err := vm.WaitConsoleFrom(ctx, vm.Mark(), "COFFER WROTE"); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(filepath.Join(e.Dir, "state", "qemu", "fleece")); len(left) != 0 {
		t.Fatalf("staged files left: %v", left)
	}
	var res api.RestoredVM
	if err := json.Unmarshal([]byte(e.Must("restore", "vm", "latest", "--to", filepath.Join(e.Dir, "r"), "--start", "--json")), &res); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = qemu.Quit(context.Background(), res.QMPSocket) })
	if !res.ResumedFromMemory || res.MemoryState == "" {
		t.Fatalf("restore vm: %+v", res)
	}
	pos := clitest.WaitFile(ctx, t, res.Console, 0, "COFFER WROTE")
	clitest.WaitFile(ctx, t, res.Console, pos, "COFFER WROTE")
	console, _ := os.ReadFile(res.Console)
	for _, bad := range []string{"COFFER READY", "COFFER CHECK", "FAIL", "ERROR", "MISMATCH"} {
		if strings.Contains(string(console), bad) {
			t.Fatalf("the restored guest printed %q (it should have resumed, not booted):\n%s", bad, console)
		}
	}
}
