package repocmd_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
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
	e := clitest.NewEnv(t)
	src, dst := filepath.Join(mnt, "src"), filepath.Join(mnt, "dst")
	sharedKeyPair(e, src, dst)
	copyOffloadCrashPoints(t, e, src, dst, dirSnapshot{t: t, dir: dst, saved: filepath.Join(mnt, "dst-saved")}, "cloned")
}

// TestS3CopyOffloadKilledAtEveryStep is the same crash loop for a copy
// between two buckets of one S3 service (server-side copies).
func TestS3CopyOffloadKilledAtEveryStep(t *testing.T) {
	if testing.Short() {
		t.Skip("crash loop")
	}
	srv := testutil.StartS3(t)
	e, _ := newS3Env(t, srv, false, srv.Endpoint)
	bucket := srv.Bucket(t, false)
	src, dst := e.Repo, "s3://"+bucket+"/offsite"
	sharedKeyPair(e, src, dst)
	copyOffloadCrashPoints(t, e, src, dst, &bucketSnapshot{e: e, srv: srv, bucket: bucket}, "server-side")
}

// copyOffloadCrashPoints kills a copy that adopts whole packs at each of
// its store mutations in turn (the lease, every pack copy, the index
// segment, the disk map, the manifest), before and after the mutation,
// each time from the same empty target (snap). After every kill the
// target verifies; the next copy finishes it, stores no chunk twice (a
// pack copied before the kill is indexed by crash recovery, not copied
// again) and the point restores byte for byte.
func copyOffloadCrashPoints(t *testing.T, e *clitest.Env, src, dst string, snap repoSnapshot, method string) {
	img := e.Image("vm.img", 32<<20, 8)
	e.Must("backup", "disk", img, "--name", "vm")
	point := clitest.SnapshotsJSON(t, e)[0].ID
	snap.save()
	kills, packs := 0, int64(0)
	for n := 1; ; n++ {
		completed := false
		for _, after := range []bool{false, true} {
			snap.restore()
			if !crashed(e, n, after, "copy", "--to", dst) {
				completed = true
				break
			}
			kills++
			e.Vars["COFFER_REPO"] = dst
			e.Must("verify")
			e.Vars["COFFER_REPO"] = src
			res := copyTo(e, t, dst)
			// What the killed copy adopted is reused; the rest is adopted now.
			if res.ChunksRead != 0 || (res.Offload.PacksAdopted > 0 && res.Offload.Method != method) {
				t.Fatalf("kill at mutation %d (after=%v): the re-run %+v", n, after, res)
			}
			packs = max(packs, res.Offload.PacksAdopted)
			e.Vars["COFFER_REPO"] = dst
			if s := repoStats(t, e); s.PackBytes > s.Unique+s.Unique/20+64<<10 {
				t.Fatalf("kill at mutation %d (after=%v): target packs %d bytes for %d unique: chunks stored twice", n, after, s.PackBytes, s.Unique)
			}
			e.Vars["COFFER_REPO"] = src
			restorePointAndCompare(t, e, dst, point, img)
		}
		if completed {
			break
		}
	}
	// Killed before its first mutation, a copy adopts every pack on re-run.
	if packs < 8 || kills < 2*int(packs) {
		t.Fatalf("%d kills, at most %d packs adopted by a re-run: the crash points missed the pack copies", kills, packs)
	}
	t.Logf("%d kills, each followed by a complete copy", kills)
}
