package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/coffer-backup/coffer/internal/testutil"
)

// dirSnapshot saves a directory and puts it back as it was.
type dirSnapshot struct {
	t          *testing.T
	dir, saved string
}

func (d dirSnapshot) save() { d.cp(d.dir, d.saved) }

func (d dirSnapshot) restore() {
	if err := os.RemoveAll(d.dir); err != nil {
		d.t.Fatal(err)
	}
	d.cp(d.saved, d.dir)
}

func (d dirSnapshot) cp(from, to string) {
	_ = os.RemoveAll(to)
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		d.t.Fatalf("cp -a %s %s: %v %s", from, to, err, out)
	}
}

// TestCopyOffloadKilledAtEveryStep kills a copy that clones packs at each
// of its store mutations in turn (the lease, every pack clone, the index
// segment, the disk map, the manifest), before and after the mutation,
// each time from the same empty target. After every kill the target
// verifies; the next copy finishes it, stores no chunk twice (a pack
// cloned before the kill is indexed by crash recovery, not cloned again)
// and the point restores byte for byte.
func TestCopyOffloadKilledAtEveryStep(t *testing.T) {
	if testing.Short() {
		t.Skip("crash loop")
	}
	mnt := testutil.MountLoopFS(t, "xfs", 512<<20, "-q", "-m", "reflink=1")
	e := newEnv(t)
	src, dst := filepath.Join(mnt, "src"), filepath.Join(mnt, "dst")
	sharedKeyPair(e, src, dst)
	img := e.image("vm.img", 32<<20, 8)
	e.must("backup", "disk", img, "--name", "vm")
	point := snapshotsJSON(t, e)[0].ID
	packs := int64(packFiles(t, src))
	snap := dirSnapshot{t: t, dir: dst, saved: filepath.Join(mnt, "dst-saved")}
	snap.save()
	kills := 0
	for n := 1; ; n++ {
		completed := false
		for _, after := range []bool{false, true} {
			snap.restore()
			if !e.crashed(n, after, "copy", "--to", dst) {
				completed = true
				break
			}
			kills++
			e.vars["COFFER_REPO"] = dst
			e.must("verify")
			e.vars["COFFER_REPO"] = src
			res := e.copyTo(t, dst)
			// What the killed copy cloned is reused; the rest is cloned now.
			if res.ChunksRead != 0 || res.Offload.PacksAdopted > packs {
				t.Fatalf("kill at mutation %d (after=%v): the re-run %+v", n, after, res)
			}
			e.vars["COFFER_REPO"] = dst
			if s := repoStats(t, e); s.PackBytes > s.Unique+s.Unique/20+64<<10 {
				t.Fatalf("kill at mutation %d (after=%v): target packs %d bytes for %d unique: chunks stored twice", n, after, s.PackBytes, s.Unique)
			}
			e.vars["COFFER_REPO"] = src
			restorePointAndCompare(t, e, dst, point, img)
		}
		if completed {
			break
		}
	}
	if kills < 2*int(packs) {
		t.Fatalf("only %d kills for a copy of %d packs: the crash points missed the clones", kills, packs)
	}
	t.Logf("%d kills, each followed by a complete copy", kills)
}
