package failover

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/coffer-backup/coffer/internal/replica"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestCreateOverlaysKeepsTheDRWrites: finishing a killed failover creates
// only the overlays it lacks, above the point, and keeps an existing one
// byte for byte (it may hold what the DR VM wrote); no temporary file is
// left.
func TestCreateOverlaysKeepsTheDRWrites(t *testing.T) {
	testutil.RequireBinary(t, "qemu-img")
	ctx := context.Background()
	dir := t.TempDir()
	point := map[string]string{}
	for _, k := range []string{"vda", "vdb"} {
		point[k] = filepath.Join(dir, "point-"+k+".qcow2")
		if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", point[k], "1M").CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
	}
	fo := &replica.FailedOver{Overlays: map[string]string{
		"vda": replica.ActiveFile(dir, "vda"), "vdb": replica.ActiveFile(dir, "vdb")}}
	if err := os.WriteFile(fo.Overlays["vda"], []byte("the DR site's writes"), 0o600); err != nil {
		t.Fatal(err)
	}
	vm := VM{Name: "web-1", Dir: dir}
	if err := createOverlays(ctx, vm, fo, pointRef{seq: 1, disks: point}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(fo.Overlays["vda"]); err != nil || string(b) != "the DR site's writes" {
		t.Fatalf("the existing overlay was replaced: %q %v", b, err)
	}
	if b := backingOf(t, fo.Overlays["vdb"]); b != point["vdb"] {
		t.Fatalf("the created overlay's backing file is %q, want %s", b, point["vdb"])
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(left) > 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	if err := removeOverlays(fo); err != nil {
		t.Fatal(err)
	}
	for _, f := range fo.Overlays {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Fatalf("%s not removed: %v", f, err)
		}
	}
}

func backingOf(t *testing.T, img string) string {
	t.Helper()
	out, err := exec.Command("qemu-img", "info", "-U", "--output=json", img).Output()
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Backing string `json:"full-backing-filename"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatal(err)
	}
	return info.Backing
}
