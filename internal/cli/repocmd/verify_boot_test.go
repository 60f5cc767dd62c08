package repocmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/guestvm"
)

// TestVerifyBoot: `coffer verify boot VM` boots the VM's newest point and
// passes the ladder with an HTTP probe; the result is stored in the
// repository, so `coffer snapshots` shows it in the BOOT column even after
// the catalog is gone; `verify boot show` and `list` read it back, here
// and through a server; a point that does not boot exits 5 naming the
// step, and its failed ladder is read back too.
func TestVerifyBoot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := clitest.NewEnv(t)
	vm := clitest.StartBootGuest(ctx, t, e)
	e.Must("init")
	e.Must("backup", "vm", vm.QMPPath)
	vm.Kill()

	shot := filepath.Join(e.Dir, "screen.png")
	bootFlags := []string{"--marker", guestvm.BootMarker, "--probe", fmt.Sprintf("http:%d/=200", guestvm.BootProbePort)}
	out := e.Must(append([]string{"verify", "boot", "web-1"}, append(bootFlags, "--screenshot", shot, "--json")...)...)
	var doc api.BootVerification
	if err := json.Unmarshal([]byte(out), &doc); err != nil || !doc.Passed || len(doc.Steps) != 6 || doc.VM != "web-1" {
		t.Fatalf("verify boot: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(shot); err != nil || !strings.HasPrefix(string(b), "\x89PNG") {
		t.Fatalf("screenshot file: %v", err)
	}
	if err := os.Remove(filepath.Join(e.Dir, "catalog.db")); err != nil {
		t.Fatal(err)
	}
	var points []api.BackupPoint
	if err := json.Unmarshal([]byte(e.Must("snapshots", "--json")), &points); err != nil || len(points) != 1 ||
		points[0].BootVerification == nil || !points[0].BootVerification.Passed {
		t.Fatalf("snapshots: %+v %v", points, err)
	}
	if table := e.Must("snapshots"); !strings.Contains(table, "BOOT") || !strings.Contains(table, " ok ") {
		t.Fatalf("snapshots table:\n%s", table)
	}
	checkBootReadBack(t, e, doc, shot, bootFlags...)

	// The same point, a marker it never prints: exit 5, step 3 named.
	code, stdout, stderr := e.Run("verify", "boot", "latest", "--marker", "never-printed", "--timeout", "20s")
	if code != command.ExitIntegrity || !strings.Contains(stderr, "step 3 (console-marker)") || !strings.Contains(stdout, "next: look at the console tail") ||
		strings.Contains(stderr, "verify --read-data") {
		t.Fatalf("verify boot of a point without the marker: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if table := e.Must("snapshots"); !strings.Contains(table, "failed@3") {
		t.Fatalf("snapshots table after a failed verification:\n%s", table)
	}
	if left, _ := filepath.Glob(filepath.Join(e.Dir, "state", "bootverify", "*")); len(left) != 0 {
		t.Fatalf("left in the state directory: %v", left)
	}
	checkBootFailedAndUnverified(t, e)
}
