package mediacmd_test

import (
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
)

// media copy --drives 2 writes a session through each of two drives at
// once, on cartridges of their own; every volume verifies against the
// catalogue and every point restores from tape. More drives than the
// library has is refused before anything is written.
func TestMediaCopyThroughTwoDrives(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	imgs := map[string]string{}
	for i, name := range []string{"a", "b", "c"} {
		imgs[name] = e.Image(name+".img", int64(4+i)<<20, 2+i)
		e.Must("backup", "disk", imgs[name], "--name", name)
	}
	lib := filepath.Join(e.Dir, "vtl")
	e.Must("media", "vtl", "create", lib, "--drives", "2", "--slots", "6", "--capacity", "64MiB")
	for i := 1; i <= 4; i++ {
		e.Must("media", "vtl", "add", lib, "CFR00"+string(rune('0'+i))+"L8", "--slot", string(rune('0'+i)))
	}
	if code, _, errOut := e.Run("media", "copy", "--library", lib, "--pool", "p", "--drives", "3"); code != 2 || !strings.Contains(errOut, "no drive 2") {
		t.Fatalf("--drives 3 on a library of 2: exit %d, %s", code, errOut)
	}
	res := clitest.Decode[api.MediaCopyResult](t, e.Must("media", "copy", "--library", lib, "--pool", "p", "--drives", "2", "--json"))
	if res.Drives != 2 || len(res.Sessions) != 2 || res.Sessions[0] == res.Sessions[1] || len(res.Copied) != 3 || len(res.Volumes) != 2 ||
		res.Volumes[0].Barcode == res.Volumes[1].Barcode {
		t.Fatalf("copy through two drives: %+v", res)
	}
	for _, v := range res.Volumes {
		rep := clitest.Decode[api.MediaVerifyReport](t, e.Must("media", "verify", "--library", lib, v.Barcode, "--json"))
		if !rep.OK || !rep.CatalogueMatches {
			t.Fatalf("verify %s: %+v", v.Barcode, rep)
		}
	}
	for _, p := range clitest.SnapshotsJSON(t, e) {
		out := filepath.Join(e.Dir, "restored-"+p.VM)
		e.Must("media", "restore", "--library", lib, p.ID[:10], "--to", out)
		if !clitest.SameFile(t, out, imgs[p.VM]) {
			t.Fatalf("point of %s restores wrong from a copy through two drives", p.VM)
		}
	}
}

// coffer killed at a random instant of a copy through two drives leaves
// both drives' volumes appending cleanly: the next copy through both
// succeeds, every volume verifies, and the points restore from tape.
func TestMediaCopyThroughTwoDrivesKilled(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	imgs := map[string]string{"a": e.Image("a.img", 8<<20, 4), "b": e.Image("b.img", 6<<20, 3)}
	e.Must("backup", "disk", imgs["a"], "--name", "a")
	e.Must("backup", "disk", imgs["b"], "--name", "b")
	lib := filepath.Join(e.Dir, "vtl")
	// Drives of 16 MiB/s take the modelled time for real, so that the
	// kills land while blocks are written.
	e.Must("media", "vtl", "create", lib, "--drives", "2", "--slots", "4", "--capacity", "64MiB", "--rate", "16MiB", "--throttle")
	e.Must("media", "vtl", "add", lib, "CFR001L8", "--slot", "1")
	e.Must("media", "vtl", "add", lib, "CFR002L8", "--slot", "2")
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 22))
	for range 3 {
		at := time.Duration(50+r.IntN(300)) * time.Millisecond
		e.KillAfter(at, "media", "copy", "--library", lib, "--pool", "p", "--drives", "2")
		res := clitest.Decode[api.MediaCopyResult](t, e.Must("media", "copy", "--library", lib, "--pool", "p", "--drives", "2", "--json"))
		if len(res.Sessions) != 2 || len(res.Copied) != 2 {
			t.Fatalf("copy after a kill at %v: %+v", at, res)
		}
		for _, bc := range []string{"CFR001L8", "CFR002L8"} {
			rep := clitest.Decode[api.MediaVerifyReport](t, e.Must("media", "verify", "--library", lib, bc, "--json"))
			if !rep.OK || len(rep.BadBlocks) != 0 {
				t.Fatalf("verify %s after a kill at %v: %+v", bc, at, rep)
			}
		}
	}
	for _, p := range clitest.SnapshotsJSON(t, e) {
		out := filepath.Join(e.Dir, "restored-"+p.VM)
		e.Must("media", "restore", "--library", lib, p.ID[:10], "--to", out)
		if !clitest.SameFile(t, out, imgs[p.VM]) {
			t.Fatalf("point of %s restores wrong from volumes written through kills", p.VM)
		}
	}
}
