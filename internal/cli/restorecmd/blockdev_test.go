package restorecmd_test

import (
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// loopDevice attaches a file as a block device for the test.
func loopDevice(t *testing.T, file string) string {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "losetup")
	out, err := exec.Command("losetup", "--find", "--show", file).CombinedOutput()
	if err != nil {
		if testutil.Strict() {
			t.Fatalf("losetup: %v %s", err, out)
		}
		t.Skipf("no loop devices here: %s", out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", dev).Run() })
	return dev
}

// TestBlockDevices backs up a block device and restores onto another one
// full of old data: holes must come back as zeros (zeroing offload or
// writes), and the device must equal the source byte for byte.
func TestBlockDevices(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	img := e.Image("src.img", 24<<20, 4)
	srcDev := loopDevice(t, img)
	e.Must("backup", "disk", srcDev, "--name", "dev")
	junk := filepath.Join(e.Dir, "target.img")
	buf := make([]byte, 24<<20)
	_, _ = rand.Read(buf)
	if err := os.WriteFile(junk, buf, 0o600); err != nil {
		t.Fatal(err)
	}
	dstDev := loopDevice(t, junk)
	onDevice := clitest.Decode[[]api.RestoredDisk](t, e.Must("restore", "latest", "--to", dstDev, "--json"))
	if !clitest.SameFile(t, dstDev, img) {
		t.Fatal("block device restore differs from the source (holes not zeroed?)")
	}
	// The block-zero primitive says which path it took: the device's
	// zeroing or zeros written (either, by the kernel's loop driver), all
	// of the zero bytes; onto a file, holes alone.
	d := onDevice[0]
	if d.ZeroBytes < 16<<20 || d.ZeroOffloadedBytes+d.ZeroWrittenBytes < d.ZeroBytes {
		t.Fatalf("zeroing onto a device: %+v", d)
	}
	asFile := clitest.Decode[[]api.RestoredDisk](t, e.Must("restore", "latest", "--to", filepath.Join(e.Dir, "restored.img"), "--json"))
	if f := asFile[0]; f.ZeroBytes != d.ZeroBytes || f.ZeroOffloadedBytes != f.ZeroBytes || f.ZeroWrittenBytes != 0 {
		t.Fatalf("zeroing onto a sparse file: %+v", f)
	}
	// A smaller device is refused before anything is written.
	small := filepath.Join(e.Dir, "small.img")
	_ = os.WriteFile(small, make([]byte, 1<<20), 0o600)
	smallDev := loopDevice(t, small)
	if out := e.Expect(command.ExitFailure, "restore", "latest", "--to", smallDev); !strings.Contains(out, "needs") {
		t.Fatalf("small device: %s", out)
	}
}
