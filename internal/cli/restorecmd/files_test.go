package restorecmd_test

import (
	"archive/zip"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/demo"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestFilesCommands backs up an ext4 disk built by mkfs.ext4 -d and reads
// single files back through `coffer files` without restoring the disk.
func TestFilesCommands(t *testing.T) {
	testutil.RequireBinary(t, "mkfs.ext4")
	testutil.RequireBinary(t, "debugfs")
	e := clitest.NewEnv(t)
	img := filepath.Join(e.Dir, "machine.raw")
	if err := demo.MakeDiskImage(e.Dir, img, 64); err != nil {
		t.Fatal(err)
	}
	e.Must("init")
	e.Must("backup", "disk", img, "--name", "m")
	if out := e.Must("files", "ls", "latest", "/"); !strings.Contains(out, "etc") || !strings.Contains(out, "srv") {
		t.Fatalf("ls /: %s", out)
	}
	if out := e.Must("files", "ls", "latest:0", "/srv", "-l"); !strings.Contains(out, "bash") || !strings.Contains(out, "-rwxr-xr-x") {
		t.Fatalf("ls -l /srv: %s", out)
	}
	if out := e.Must("files", "find", "latest", "*.bin"); strings.TrimSpace(out) != "/srv/data/random.bin" {
		t.Fatalf("find: %q", out)
	}
	dst := filepath.Join(e.Dir, "out")
	e.Must("files", "get", "latest", "/etc/motd", "/srv/bash", "--to", dst)
	got, err := os.ReadFile(filepath.Join(dst, "motd"))
	if err != nil || string(got) != "welcome to the coffer demo machine\n" {
		t.Fatalf("motd: %q %v", got, err)
	}
	// debugfs (e2fsprogs) reads the same files from the original image as
	// the oracle: random.bin (contiguous) and bash, which mkfs.ext4 -d
	// stores with holes (go-diskfs alone shifts its bytes after the first).
	e.Must("files", "get", "latest", "/srv/data/random.bin", "--to", dst)
	for _, f := range []string{"/srv/data/random.bin", "/srv/bash"} {
		oracle := filepath.Join(e.Dir, "oracle")
		os.Remove(oracle)
		if out, err := exec.Command("debugfs", "-R", "dump "+f+" "+oracle, img).CombinedOutput(); err != nil {
			t.Fatalf("debugfs: %v %s", err, out)
		}
		want, _ := os.ReadFile(oracle)
		got, _ := os.ReadFile(filepath.Join(dst, filepath.Base(f)))
		if len(want) == 0 || !bytes.Equal(want, got) {
			t.Fatalf("extracted %s differs from debugfs's copy (%d vs %d bytes)", f, len(got), len(want))
		}
	}
	if fi, err := os.Stat(filepath.Join(dst, "bash")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode of bash: %v %v", fi.Mode(), err)
	}
	zp := filepath.Join(e.Dir, "etc.zip")
	e.Must("files", "get", "latest", "/etc", "--zip", zp)
	zr, err := zip.OpenReader(zp)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	found := false
	for _, f := range zr.File {
		found = found || strings.HasSuffix(f.Name, "etc/motd")
	}
	if !found {
		t.Fatal("zip lacks etc/motd")
	}
	if code, _, errOut := e.Run("files", "ls", "latest", "/no/such/dir"); code == 0 || errOut == "" {
		t.Fatalf("missing dir: exit %d %q", code, errOut)
	}
	e.Expect(2, "files", "get", "latest", "/etc")
}
