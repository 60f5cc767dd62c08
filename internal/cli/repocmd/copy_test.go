package repocmd_test

import (
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/repo"
)

// chunksPerMiB is how many chunks one MiB of changed data is at the default
// chunk size (the test images change data in whole MiB).
const chunksPerMiB = (1 << 20) / repo.DefaultChunkSize

type copyResult struct {
	Copied        []string `json:"copied"`
	AlreadyThere  []string `json:"already_present"`
	ChunksRead    int64    `json:"chunks_read"`
	ChunksWritten int64    `json:"chunks_written"`
	ReEncrypted   bool     `json:"re_encrypted"`
	WrittenBytes  int64    `json:"written_bytes"`
	Offload       struct {
		Method        string `json:"method"`
		PacksAdopted  int64  `json:"packs_adopted"`
		ChunksAdopted int64  `json:"chunks_adopted"`
		BytesAdopted  int64  `json:"adopted_bytes"`
		PacksPartial  int64  `json:"packs_partial"`
		Unavailable   string `json:"unavailable"`
	} `json:"offload"`
}

func copyTo(e *clitest.Env, t *testing.T, target string, args ...string) copyResult {
	var res copyResult
	out := e.Must(append([]string{"copy", "--to", target, "--json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("copy output %q: %v", out, err)
	}
	return res
}

func changeMiB(t *testing.T, img string, off int64) {
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	_, _ = rand.Read(buf)
	if _, err := f.WriteAt(buf, off); err != nil {
		t.Fatal(err)
	}
}

func restoreAndCompare(t *testing.T, e *clitest.Env, repo, img string) {
	t.Helper()
	restorePointAndCompare(t, e, repo, "latest", img)
}

// restorePointAndCompare verifies repo with its data and checks that
// point restores as img.
func restorePointAndCompare(t *testing.T, e *clitest.Env, repo, point, img string) {
	t.Helper()
	saved := e.Vars["COFFER_REPO"]
	e.Vars["COFFER_REPO"] = repo
	defer func() { e.Vars["COFFER_REPO"] = saved }()
	e.Must("verify", "--read-data")
	out := filepath.Join(e.Dir, "copy-restored-"+time.Now().Format("150405.000000"))
	e.Must("restore", point, "--to", out)
	if !clitest.SameFile(t, out, img) {
		t.Fatalf("point %s of %s restores wrong", point, repo)
	}
}

func TestCopyReEncryptsAndStaysIncremental(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	img := e.Image("vm.img", 32<<20, 8)
	e.Must("backup", "disk", img, "--name", "vm")
	target := filepath.Join(e.Dir, "offsite")
	e.Vars["COFFER_TO_PASSWORD"] = "another password"
	saved := e.Vars["COFFER_REPO"]
	e.Vars["COFFER_REPO"], e.Vars["COFFER_PASSWORD"] = target, "another password"
	e.Must("init")
	e.Vars["COFFER_REPO"], e.Vars["COFFER_PASSWORD"] = saved, "correct horse"

	first := copyTo(e, t, target)
	if len(first.Copied) != 1 || !first.ReEncrypted || first.ChunksWritten != 8*chunksPerMiB {
		t.Fatalf("first copy: %+v", first)
	}
	changeMiB(t, img, 4<<20)
	e.Must("backup", "disk", img, "--name", "vm")
	second := copyTo(e, t, target)
	// Only the changed chunks are read, thanks to the previous copied point.
	if len(second.Copied) != 1 || len(second.AlreadyThere) != 1 || second.ChunksRead != chunksPerMiB || second.ChunksWritten != chunksPerMiB {
		t.Fatalf("incremental copy: %+v", second)
	}
	if again := copyTo(e, t, target); len(again.Copied) != 0 || again.ChunksRead != 0 {
		t.Fatalf("repeated copy did work: %+v", again)
	}
	e.Vars["COFFER_PASSWORD"] = "another password"
	restoreAndCompare(t, e, target, img)
}

func TestCopyWithSharedKeysAsksTargetFirst(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	img := e.Image("vm.img", 32<<20, 8)
	e.Must("backup", "disk", img, "--name", "vm")
	target := filepath.Join(e.Dir, "offsite")
	e.Vars["COFFER_TO_PASSWORD"] = "correct horse" // source password for --copy-keys-from
	saved := e.Vars["COFFER_REPO"]
	e.Vars["COFFER_REPO"] = target
	e.Must("init", "--copy-keys-from", saved)
	e.Vars["COFFER_REPO"] = saved
	res := copyTo(e, t, target)
	if res.ReEncrypted || res.ChunksWritten != 8*chunksPerMiB {
		t.Fatalf("shared-key copy: %+v", res)
	}
	changeMiB(t, img, 0)
	e.Must("backup", "disk", img, "--name", "vm")
	// Through coffer (the chunk path): whole packs would not be read at all.
	res = copyTo(e, t, target, "--no-offload")
	if res.ChunksRead != chunksPerMiB || res.Offload.PacksAdopted != 0 {
		t.Fatalf("shared-key incremental read %d chunks from the source, want %d", res.ChunksRead, chunksPerMiB)
	}
	restoreAndCompare(t, e, target, img)
}

// TestCopyResumesAfterKill kills copies and checks the target stays valid
// and the final run writes each chunk once.
func TestCopyResumesAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("crash loop")
	}
	e := clitest.NewEnv(t)
	e.Must("init", "--pack-size", "1MiB")
	img := e.Image("vm.img", 64<<20, 30)
	e.Must("backup", "disk", img, "--name", "vm")
	target := filepath.Join(e.Dir, "offsite")
	saved := e.Vars["COFFER_REPO"]
	e.Vars["COFFER_TO_PASSWORD"] = "correct horse"
	e.Vars["COFFER_REPO"] = target
	e.Must("init", "--pack-size", "1MiB")
	e.Vars["COFFER_REPO"] = saved
	for _, d := range []time.Duration{20 * time.Millisecond, 80 * time.Millisecond, 150 * time.Millisecond} {
		e.KillAfter(d, "copy", "--to", target)
		e.Vars["COFFER_REPO"] = target
		e.Must("verify")
		e.Vars["COFFER_REPO"] = saved
	}
	copyTo(e, t, target)
	e.Vars["COFFER_REPO"] = target
	s := repoStats(t, e)
	if s.PackBytes > s.Unique+s.Unique/20+64<<10 {
		t.Fatalf("target packs %d bytes for %d unique: interrupted copies wrote chunks twice", s.PackBytes, s.Unique)
	}
	e.Vars["COFFER_REPO"] = saved
	restoreAndCompare(t, e, target, img)
}
