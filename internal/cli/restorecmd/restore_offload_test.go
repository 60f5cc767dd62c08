package restorecmd_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// restore --copies makes test copies of a disk from the restored one: on
// XFS with reflinks they are clones, elsewhere copies with the holes kept;
// each says which, and every copy equals the source. Copies that exist
// are refused before anything is restored.
func TestRestoreCopies(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	img := e.Image("web.img", 32<<20, 6)
	e.Must("backup", "disk", img, "--name", "web")

	for _, c := range []struct {
		dir  string
		want string
	}{
		{testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1"), "cloned"},
		{t.TempDir(), "kernel-copied"}, // ext4 here: no reflinks
	} {
		target := filepath.Join(c.dir, "web.raw")
		res := clitest.Decode[[]api.RestoredDisk](t, e.Must("restore", "latest", "--to", target, "--copies", "3", "--json"))
		if len(res) != 1 || len(res[0].Copies) != 2 {
			t.Fatalf("restore --copies 3: %+v", res)
		}
		for k, cp := range res[0].Copies {
			if want := filepath.Join(c.dir, "web-copy"+string(rune('2'+k))+".raw"); cp.Target != want {
				t.Fatalf("copy %d is %s, want %s", k+2, cp.Target, want)
			}
			if cp.Method != c.want || cp.DataBytes != 6<<20 {
				t.Fatalf("copy %s: %+v, want %s of 6 MiB", cp.Target, cp, c.want)
			}
			if !clitest.SameFile(t, cp.Target, img) {
				t.Fatalf("copy %s differs from the backed-up disk", cp.Target)
			}
		}
	}

	// A copy's name taken: refused, and the restore has not started.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "db-copy2.raw"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := e.Expect(command.ExitUsage, "restore", "latest", "--to", filepath.Join(dir, "db.raw"), "--copies", "2"); !strings.Contains(out, "--overwrite") {
		t.Fatalf("an existing copy: %s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "db.raw")); !os.IsNotExist(err) {
		t.Fatalf("the disk was restored although its copy was refused: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "db-copy2.raw")); string(got) != "mine" {
		t.Fatalf("the existing copy was changed: %q", got)
	}
}

// restore --no-offload turns the storage's part off, on a filesystem that
// could do it all: the zeros are written (the file takes its full size)
// and the copy goes through coffer, each reported so.
func TestRestoreWithoutOffload(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	img := e.Image("web.img", 32<<20, 6)
	e.Must("backup", "disk", img, "--name", "web")
	mnt := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
	target := filepath.Join(mnt, "web.raw")
	res := clitest.Decode[[]api.RestoredDisk](t, e.Must("restore", "latest", "--to", target, "--copies", "2", "--no-offload", "--json"))
	d := res[0]
	if d.ZeroBytes != 26<<20 || d.ZeroWrittenBytes != d.ZeroBytes || d.ZeroOffloadedBytes != 0 {
		t.Fatalf("zeros without offload: %+v, want all 26 MiB written", d)
	}
	if len(d.Copies) != 1 || d.Copies[0].Method != "copied" {
		t.Fatalf("copy without offload: %+v", d.Copies)
	}
	for _, p := range []string{target, d.Copies[0].Target} {
		if !clitest.SameFile(t, p, img) {
			t.Fatalf("%s differs from the backed-up disk", p)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(target, &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*512 < 32<<20 {
		t.Fatalf("the restored file has %d bytes allocated: its zeros were not written", st.Blocks*512)
	}
}
