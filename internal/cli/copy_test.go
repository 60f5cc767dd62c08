package cli

import (
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

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

func (e *env) copyTo(t *testing.T, target string, args ...string) copyResult {
	var res copyResult
	out := e.must(append([]string{"copy", "--to", target, "--json"}, args...)...)
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

func restoreAndCompare(t *testing.T, e *env, repo, img string) {
	t.Helper()
	restorePointAndCompare(t, e, repo, "latest", img)
}

// restorePointAndCompare verifies repo with its data and checks that
// point restores as img.
func restorePointAndCompare(t *testing.T, e *env, repo, point, img string) {
	t.Helper()
	saved := e.vars["COFFER_REPO"]
	e.vars["COFFER_REPO"] = repo
	defer func() { e.vars["COFFER_REPO"] = saved }()
	e.must("verify", "--read-data")
	out := filepath.Join(e.dir, "copy-restored-"+time.Now().Format("150405.000000"))
	e.must("restore", point, "--to", out)
	if !sameFile(t, out, img) {
		t.Fatalf("point %s of %s restores wrong", point, repo)
	}
}

func TestCopyReEncryptsAndStaysIncremental(t *testing.T) {
	e := newEnv(t)
	e.must("init")
	img := e.image("vm.img", 32<<20, 8)
	e.must("backup", "disk", img, "--name", "vm")
	target := filepath.Join(e.dir, "offsite")
	e.vars["COFFER_TO_PASSWORD"] = "another password"
	saved := e.vars["COFFER_REPO"]
	e.vars["COFFER_REPO"], e.vars["COFFER_PASSWORD"] = target, "another password"
	e.must("init")
	e.vars["COFFER_REPO"], e.vars["COFFER_PASSWORD"] = saved, "correct horse"

	first := e.copyTo(t, target)
	if len(first.Copied) != 1 || !first.ReEncrypted || first.ChunksWritten != 8*chunksPerMiB {
		t.Fatalf("first copy: %+v", first)
	}
	changeMiB(t, img, 4<<20)
	e.must("backup", "disk", img, "--name", "vm")
	second := e.copyTo(t, target)
	// Only the changed chunks are read, thanks to the previous copied point.
	if len(second.Copied) != 1 || len(second.AlreadyThere) != 1 || second.ChunksRead != chunksPerMiB || second.ChunksWritten != chunksPerMiB {
		t.Fatalf("incremental copy: %+v", second)
	}
	if again := e.copyTo(t, target); len(again.Copied) != 0 || again.ChunksRead != 0 {
		t.Fatalf("repeated copy did work: %+v", again)
	}
	e.vars["COFFER_PASSWORD"] = "another password"
	restoreAndCompare(t, e, target, img)
}

func TestCopyWithSharedKeysAsksTargetFirst(t *testing.T) {
	e := newEnv(t)
	e.must("init")
	img := e.image("vm.img", 32<<20, 8)
	e.must("backup", "disk", img, "--name", "vm")
	target := filepath.Join(e.dir, "offsite")
	e.vars["COFFER_TO_PASSWORD"] = "correct horse" // source password for --copy-keys-from
	saved := e.vars["COFFER_REPO"]
	e.vars["COFFER_REPO"] = target
	e.must("init", "--copy-keys-from", saved)
	e.vars["COFFER_REPO"] = saved
	res := e.copyTo(t, target)
	if res.ReEncrypted || res.ChunksWritten != 8*chunksPerMiB {
		t.Fatalf("shared-key copy: %+v", res)
	}
	changeMiB(t, img, 0)
	e.must("backup", "disk", img, "--name", "vm")
	// Through coffer (the chunk path): whole packs would not be read at all.
	res = e.copyTo(t, target, "--no-offload")
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
	e := newEnv(t)
	e.must("init", "--pack-size", "1MiB")
	img := e.image("vm.img", 64<<20, 30)
	e.must("backup", "disk", img, "--name", "vm")
	target := filepath.Join(e.dir, "offsite")
	saved := e.vars["COFFER_REPO"]
	e.vars["COFFER_TO_PASSWORD"] = "correct horse"
	e.vars["COFFER_REPO"] = target
	e.must("init", "--pack-size", "1MiB")
	e.vars["COFFER_REPO"] = saved
	for _, d := range []time.Duration{20 * time.Millisecond, 80 * time.Millisecond, 150 * time.Millisecond} {
		e.killAfter(d, "copy", "--to", target)
		e.vars["COFFER_REPO"] = target
		e.must("verify")
		e.vars["COFFER_REPO"] = saved
	}
	e.copyTo(t, target)
	e.vars["COFFER_REPO"] = target
	s := repoStats(t, e)
	if s.PackBytes > s.Unique+s.Unique/20+64<<10 {
		t.Fatalf("target packs %d bytes for %d unique: interrupted copies wrote chunks twice", s.PackBytes, s.Unique)
	}
	e.vars["COFFER_REPO"] = saved
	restoreAndCompare(t, e, target, img)
}
