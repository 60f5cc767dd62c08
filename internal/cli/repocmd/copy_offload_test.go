package repocmd_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// sharedKeyPair makes the env's repository at src (1 MiB packs) and a
// target at dst that shares its master key (init --copy-keys-from): the
// pair a copy can move whole packs between.
func sharedKeyPair(e *clitest.Env, src, dst string) {
	e.Vars["COFFER_REPO"] = src
	e.Must("init", "--pack-size", "1MiB")
	e.Vars["COFFER_TO_PASSWORD"] = e.Vars["COFFER_PASSWORD"]
	e.Vars["COFFER_REPO"] = dst
	e.Must("init", "--pack-size", "1MiB", "--copy-keys-from", src)
	e.Vars["COFFER_REPO"] = src
}

// procIO is this process's bytes through read and write calls
// (/proc/self/io rchar + wchar): whatever coffer itself moved.
func procIO(t *testing.T) int64 {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ": ")
		if k == "rchar" || k == "wchar" {
			x, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			n += x
		}
	}
	return n
}

// usedBytes is the space used on the filesystem of dir.
func usedBytes(t *testing.T, dir string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize
}

// packFiles counts a local repository's packs.
func packFiles(t *testing.T, repo string) int {
	n := 0
	err := filepath.WalkDir(filepath.Join(repo, "data"), func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCopyOffloadClonesPacksOnXFS: between two local repositories with one
// master key on one XFS with reflinks, a copy clones the source's packs
// instead of reading them: coffer's own reads and writes and the space
// the filesystem gives out stay under 1% of the packs copied, and the
// copied points verify and restore byte for byte. An incremental copy
// clones only the new packs.
func TestCopyOffloadClonesPacksOnXFS(t *testing.T) {
	mnt := testutil.MountLoopFS(t, "xfs", 1<<30, "-m", "reflink=1")
	e := clitest.NewEnv(t)
	src, dst := filepath.Join(mnt, "src"), filepath.Join(mnt, "dst")
	sharedKeyPair(e, src, dst)
	img := e.Image("vm.img", 128<<20, 64)
	e.Must("backup", "disk", img, "--name", "vm")

	io0, used0 := procIO(t), usedBytes(t, mnt)
	res := copyTo(e, t, dst)
	host, used := procIO(t)-io0, usedBytes(t, mnt)-used0
	o := res.Offload
	if o.Method != "cloned" || o.PacksAdopted != int64(packFiles(t, src)) || o.PacksPartial != 0 || res.ChunksRead != 0 ||
		o.ChunksAdopted != 64*chunksPerMiB || res.ChunksWritten != o.ChunksAdopted {
		t.Fatalf("copy between repositories on one XFS: %+v", res)
	}
	if host > o.BytesAdopted/100 || used > o.BytesAdopted/100 {
		t.Fatalf("cloning %d bytes of packs moved %d bytes through coffer and took %d bytes of space (1%% allowed)", o.BytesAdopted, host, used)
	}
	t.Logf("cloned %d packs (%d bytes): %d bytes through coffer, %d bytes of new space", o.PacksAdopted, o.BytesAdopted, host, used)
	if j := e.JobOf("copy"); !clitest.LogHas(j, "64 whole pack(s), 64.0 MiB, cloned by the filesystem") {
		t.Errorf("the copy's log does not say the packs were cloned: %+v", j.Events)
	}
	restoreAndCompare(t, e, dst, img)

	changeMiB(t, img, 2<<20)
	before := packFiles(t, src)
	e.Must("backup", "disk", img, "--name", "vm")
	e.Vars["COFFER_REPO"] = src
	res = copyTo(e, t, dst)
	if res.Offload.PacksAdopted != int64(packFiles(t, src)-before) || res.ChunksRead != 0 ||
		res.Offload.ChunksAdopted != chunksPerMiB {
		t.Fatalf("incremental copy: %+v", res)
	}
	restoreAndCompare(t, e, dst, img)
	e.Vars["COFFER_REPO"] = dst
	if s := repoStats(t, e); s.PackBytes > s.Unique+s.Unique/20+64<<10 {
		t.Fatalf("target packs %d bytes for %d unique", s.PackBytes, s.Unique)
	}
}

// TestCopyOffloadTakesPartPacksChunkByChunk: a source pack the target
// already holds some chunks of is not cloned (it would store them twice);
// its missing chunks go through coffer, the other packs are cloned, and
// the target ends up with every chunk once.
func TestCopyOffloadTakesPartPacksChunkByChunk(t *testing.T) {
	e := clitest.NewEnv(t)
	src, dst := filepath.Join(e.Dir, "src"), filepath.Join(e.Dir, "dst")
	sharedKeyPair(e, src, dst)
	img := e.Image("vm.img", 32<<20, 16) // data at even MiB: 0, 2, ... 30
	e.Must("backup", "disk", img, "--name", "vm")
	// The target backs up, itself, an image with every other chunk of the
	// source's first 4 MiB of data: same key, same chunk IDs.
	part := filepath.Join(e.Dir, "part.img")
	data, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	const chunk = 1 << 20 / chunksPerMiB
	for off := 0; off < len(data); off += chunk {
		if off%(2*chunk) != 0 || off >= 8<<20 {
			clear(data[off : off+chunk])
		}
	}
	if err := os.WriteFile(part, data, 0o600); err != nil {
		t.Fatal(err)
	}
	e.Vars["COFFER_REPO"] = dst
	e.Must("backup", "disk", part, "--name", "part")
	e.Vars["COFFER_REPO"] = src

	res := copyTo(e, t, dst)
	point := clitest.SnapshotsJSON(t, e)[0].ID
	o := res.Offload
	// 16 MiB of data, 2 MiB of it in the target: the packs holding those
	// chunks' neighbours send them through coffer, the rest are cloned
	// (how many depends on how the backup's workers filled the packs).
	if o.PacksPartial == 0 || o.PacksAdopted == 0 || res.ChunksWritten != 14*chunksPerMiB ||
		res.ChunksRead < 2*chunksPerMiB || res.ChunksRead+o.ChunksAdopted != res.ChunksWritten {
		t.Fatalf("copy onto a target with part of the packs: %+v", res)
	}
	restorePointAndCompare(t, e, dst, point, img)
	if j := e.JobOf("copy"); !clitest.LogHas(j, "streamed through coffer") || !clitest.LogHas(j, "only partly needed") {
		t.Errorf("the copy's log does not say what went through coffer: %+v", j.Events)
	}
	e.Vars["COFFER_REPO"] = dst
	if s := repoStats(t, e); s.PackBytes > s.Unique+s.Unique/20+64<<10 {
		t.Fatalf("target packs %d bytes for %d unique: chunks stored twice", s.PackBytes, s.Unique)
	}
}

// TestCopyOffloadNeedsTheSameMasterKey: a target with its own keys gets
// every chunk re-encrypted, and the result says why nothing was cloned.
func TestCopyOffloadNeedsTheSameMasterKey(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init", "--pack-size", "1MiB")
	img := e.Image("vm.img", 16<<20, 4)
	e.Must("backup", "disk", img, "--name", "vm")
	dst := filepath.Join(e.Dir, "dst")
	saved := e.Vars["COFFER_REPO"]
	e.Vars["COFFER_REPO"] = dst
	e.Must("init")
	e.Vars["COFFER_REPO"] = saved
	e.Vars["COFFER_TO_PASSWORD"] = e.Vars["COFFER_PASSWORD"]
	res := copyTo(e, t, dst)
	if !res.ReEncrypted || res.Offload.PacksAdopted != 0 || !strings.Contains(res.Offload.Unavailable, "master key") {
		t.Fatalf("copy between repositories with different keys: %+v", res)
	}
	restoreAndCompare(t, e, dst, img)
}
