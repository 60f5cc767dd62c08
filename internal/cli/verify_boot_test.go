package cli

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
	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestVerifyBoot: `coffer verify boot VM` boots the VM's newest point and
// passes the ladder with an HTTP probe; the result is stored in the
// repository, so `coffer snapshots` shows it in the BOOT column even after
// the catalog is gone; a point that does not boot exits 5 naming the step.
func TestVerifyBoot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := newEnv(t)
	vm := startBootGuest(ctx, t, e)
	e.must("init")
	e.must("backup", "vm", vm.QMPPath)
	vm.Kill()

	shot := filepath.Join(e.dir, "screen.png")
	out := e.must("verify", "boot", "web-1", "--marker", guestvm.BootMarker, "--probe", fmt.Sprintf("http:%d/=200", guestvm.BootProbePort),
		"--screenshot", shot, "--json")
	var doc api.BootVerification
	if err := json.Unmarshal([]byte(out), &doc); err != nil || !doc.Passed || len(doc.Steps) != 6 || doc.VM != "web-1" {
		t.Fatalf("verify boot: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(shot); err != nil || !strings.HasPrefix(string(b), "\x89PNG") {
		t.Fatalf("screenshot file: %v", err)
	}
	if err := os.Remove(filepath.Join(e.dir, "catalog.db")); err != nil {
		t.Fatal(err)
	}
	var points []api.BackupPoint
	if err := json.Unmarshal([]byte(e.must("snapshots", "--json")), &points); err != nil || len(points) != 1 ||
		points[0].BootVerification == nil || !points[0].BootVerification.Passed {
		t.Fatalf("snapshots: %+v %v", points, err)
	}
	if table := e.must("snapshots"); !strings.Contains(table, "BOOT") || !strings.Contains(table, " ok ") {
		t.Fatalf("snapshots table:\n%s", table)
	}

	// The same point, a marker it never prints: exit 5, step 3 named.
	code, stdout, stderr := e.run("verify", "boot", "latest", "--marker", "never-printed", "--timeout", "20s")
	if code != ExitIntegrity || !strings.Contains(stderr, "step 3 (console-marker)") || !strings.Contains(stdout, "next: look at the console tail") ||
		strings.Contains(stderr, "verify --read-data") {
		t.Fatalf("verify boot of a point without the marker: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if table := e.must("snapshots"); !strings.Contains(table, "failed@3") {
		t.Fatalf("snapshots table after a failed verification:\n%s", table)
	}
	if left, _ := filepath.Glob(filepath.Join(e.dir, "state", "bootverify", "*")); len(left) != 0 {
		t.Fatalf("left in the state directory: %v", left)
	}
}

// startBootGuest boots web-1, the boot-mode test guest with a guest agent
// (guestvm.BootMarker, HTTP on guestvm.BootProbePort), for e, whose state
// directory it sets; it returns once the guest shows its login prompt.
func startBootGuest(ctx context.Context, t *testing.T, e *env) *guestvm.VM {
	t.Helper()
	testutil.RequireBinary(t, "qemu-system-x86_64")
	img, err := guestvm.Build(ctx)
	if err != nil {
		if err == guestvm.ErrNoAssets && !testutil.Strict() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	e.vars["COFFER_STATE_DIR"] = filepath.Join(e.dir, "state")
	disk := filepath.Join(e.dir, "vda.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", disk, "16M").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	vm, err := guestvm.Start(ctx, img, guestvm.Options{Name: "web-1", Dir: filepath.Join(e.dir, "vm"), Mode: "boot", GuestAgent: true,
		Disks: []guestvm.Disk{{ID: "vda", Path: disk, Format: "qcow2"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	if _, err := vm.WaitConsole(ctx, guestvm.BootMarker); err != nil {
		t.Fatalf("%v\n%s", err, vm.Console())
	}
	return vm
}
