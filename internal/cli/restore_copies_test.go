package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// restore --copies makes test copies of a disk from the restored one: on
// XFS with reflinks they are clones, elsewhere copies with the holes kept;
// each says which, and every copy equals the source. Copies that exist
// are refused before anything is restored.
func TestRestoreCopies(t *testing.T) {
	e := newEnv(t)
	e.must("init")
	img := e.image("web.img", 32<<20, 6)
	e.must("backup", "disk", img, "--name", "web")

	for _, c := range []struct {
		dir  string
		want string
	}{
		{testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1"), "cloned"},
		{t.TempDir(), "kernel-copied"}, // ext4 here: no reflinks
	} {
		target := filepath.Join(c.dir, "web.raw")
		res := decode[[]api.RestoredDisk](t, e.must("restore", "latest", "--to", target, "--copies", "3", "--json"))
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
			if !sameFile(t, cp.Target, img) {
				t.Fatalf("copy %s differs from the backed-up disk", cp.Target)
			}
		}
	}

	// A copy's name taken: refused, and the restore has not started.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "db-copy2.raw"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := e.expect(ExitUsage, "restore", "latest", "--to", filepath.Join(dir, "db.raw"), "--copies", "2"); !strings.Contains(out, "--overwrite") {
		t.Fatalf("an existing copy: %s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "db.raw")); !os.IsNotExist(err) {
		t.Fatalf("the disk was restored although its copy was refused: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "db-copy2.raw")); string(got) != "mine" {
		t.Fatalf("the existing copy was changed: %q", got)
	}
}
