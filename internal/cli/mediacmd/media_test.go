package mediacmd_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/demo"
	"github.com/coffer-backup/coffer/internal/media/vtl"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// mediaLibrary creates a VTL with n blank cartridges through the command
// line.
func mediaLibrary(e *clitest.Env, n int, capacity string) string {
	lib := filepath.Join(e.Dir, "vtl")
	e.Must("media", "vtl", "create", lib, "--slots", "6", "--capacity", capacity)
	for i := 1; i <= n; i++ {
		e.Must("media", "vtl", "add", lib, "CFR00"+string(rune('0'+i))+"L8", "--slot", string(rune('0'+i)))
	}
	return lib
}

// Points copied to tape, multiplexed and spanning volumes, come back with
// neither the repository nor the catalog: the catalogue is rebuilt from the
// tapes, and each disk restores byte for byte.
func TestMediaCopyRestoreWithoutRepository(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	imgA := e.Image("a.img", 8<<20, 3)
	imgB := e.Image("b.img", 6<<20, 2)
	e.Must("backup", "disk", imgA, "--name", "a")
	e.Must("backup", "disk", imgB, "--name", "b")
	points := clitest.SnapshotsJSON(t, e)
	lib := mediaLibrary(e, 4, "4MiB")

	res := clitest.Decode[api.MediaCopyResult](t, e.Must("media", "copy", "--library", lib, "--pool", "weekly", "--retention", "7d", "--json"))
	if len(res.Copied) != 2 || res.Multiplex != 2 || len(res.Volumes) < 2 || len(res.NoIndex) != 0 {
		t.Fatalf("copy: %+v", res)
	}
	vols := clitest.Decode[[]api.MediaVolume](t, e.Must("media", "volumes", "--json"))
	if len(vols) != len(res.Volumes) {
		t.Fatalf("catalogue lists %d volumes, the copy wrote %d", len(vols), len(res.Volumes))
	}

	if err := os.RemoveAll(e.Repo); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(e.Vars["COFFER_CATALOG"]); err != nil {
		t.Fatal(err)
	}
	rebuilt := clitest.Decode[api.MediaCatalogResult](t, e.Must("media", "catalog", "--library", lib, "--json"))
	if len(rebuilt.Volumes) != len(res.Volumes) || len(rebuilt.Skipped) != 4-len(res.Volumes) {
		t.Fatalf("catalogue rebuilt from the tapes: %+v", rebuilt)
	}
	for _, p := range points {
		img := imgA
		if p.VM == "b" {
			img = imgB
		}
		out := filepath.Join(e.Dir, "restored-"+p.VM)
		r := clitest.Decode[api.MediaRestoreResult](t, e.Must("media", "restore", "--library", lib, p.ID[:10], "--to", out, "--json"))
		if !clitest.SameFile(t, out, img) {
			t.Fatalf("point %s of %s restores wrong from tape", p.ID[:8], p.VM)
		}
		if r.BlocksNeeded == 0 || r.BlocksRead != r.BlocksNeeded {
			t.Fatalf("restore of %s read %d blocks for %d", p.VM, r.BlocksRead, r.BlocksNeeded)
		}
	}
	for _, v := range res.Volumes {
		rep := clitest.Decode[api.MediaVerifyReport](t, e.Must("media", "verify", "--library", lib, v.Barcode, "--json"))
		if !rep.OK || !rep.CatalogueMatches || rep.Blocks == 0 {
			t.Fatalf("verify %s: %+v", v.Barcode, rep)
		}
	}
	// Unexpired: never relabelled.
	if code, _, errOut := e.Run("media", "label", "--library", lib, "--barcode", res.Volumes[0].Barcode, "--pool", "other"); code != 2 || !strings.Contains(errOut, "protected") {
		t.Fatalf("relabel of an unexpired volume: exit %d, %s", code, errOut)
	}
}

// A damaged block inside a point's data is reported by verify with its
// position (exit 5), and the restore of that point fails with an error
// naming the volume instead of writing wrong data.
func TestMediaVerifyFindsDamage(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	img := e.Image("a.img", 4<<20, 2)
	e.Must("backup", "disk", img, "--name", "a")
	lib := mediaLibrary(e, 1, "16MiB")
	res := clitest.Decode[api.MediaCopyResult](t, e.Must("media", "copy", "--library", lib, "--pool", "p", "--json"))
	seg := res.Segments[0]
	// Bit rot in the middle of the point's first block on tape.
	vl, err := vtl.Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	if err := vl.Unload(0, 0); err != nil {
		t.Fatal(err)
	}
	if err := vl.DamageRecord(seg.Barcode, seg.Extents[0].Position); err != nil {
		t.Fatal(err)
	}
	vl.Close()
	code, out, _ := e.Run("media", "verify", "--library", lib, seg.Barcode, "--json")
	rep := clitest.Decode[api.MediaVerifyReport](t, out)
	if code != 5 || rep.OK || rep.DamagedBlocks != 1 || rep.MissingBlocks != 1 || len(rep.BadBlocks) != 1 ||
		rep.BadBlocks[0].Position != seg.Extents[0].Position {
		t.Fatalf("verify of a damaged volume: exit %d, %+v", code, rep)
	}
	code, _, errOut := e.Run("media", "restore", "--library", lib, seg.PointID, "--to", filepath.Join(e.Dir, "out"))
	if code == 0 || !strings.Contains(errOut, seg.Barcode) {
		t.Fatalf("restore across a damaged block: exit %d, %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(e.Dir, "out")); err == nil {
		t.Fatal("a restore that failed left a target file")
	}
}

// The multiplexing factor is capped at 4:1 unless the cap is raised.
func TestMediaMultiplexCap(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	e.Must("backup", "disk", e.Image("a.img", 1<<20, 1), "--name", "a")
	lib := mediaLibrary(e, 1, "16MiB")
	if code, _, errOut := e.Run("media", "copy", "--library", lib, "--pool", "p", "--multiplex", "8"); code != 2 || !strings.Contains(errOut, "cap") {
		t.Fatalf("--multiplex 8: exit %d, %s", code, errOut)
	}
	e.Must("media", "copy", "--library", lib, "--pool", "p", "--multiplex", "8", "--max-multiplex", "8")
}

// coffer killed at a random instant of a copy to tape leaves volumes that
// append cleanly: the next copy succeeds, every volume verifies against
// its index and the catalogue, and the points restore from tape.
func TestMediaCopyKilledAppendsCleanly(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	img := e.Image("a.img", 8<<20, 4)
	e.Must("backup", "disk", img, "--name", "a")
	lib := filepath.Join(e.Dir, "vtl")
	// A drive of 16 MiB/s takes the modelled time for real, so that the
	// kills land while blocks are written.
	e.Must("media", "vtl", "create", lib, "--slots", "4", "--capacity", "64MiB", "--rate", "16MiB", "--throttle")
	e.Must("media", "vtl", "add", lib, "CFR001L8", "--slot", "1")
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 21))
	killed := 0
	for range 3 {
		at := time.Duration(50+r.IntN(250)) * time.Millisecond
		if !e.KillAfter(at, "media", "copy", "--library", lib, "--pool", "p") {
			killed++
		}
		res := clitest.Decode[api.MediaCopyResult](t, e.Must("media", "copy", "--library", lib, "--pool", "p", "--json"))
		if len(res.Copied) != 1 {
			t.Fatalf("copy after a kill at %v: %+v", at, res)
		}
		rep := clitest.Decode[api.MediaVerifyReport](t, e.Must("media", "verify", "--library", lib, "CFR001L8", "--json"))
		if !rep.OK || len(rep.BadBlocks) != 0 {
			t.Fatalf("verify after a kill at %v: %+v", at, rep)
		}
	}
	t.Logf("%d of 3 copies killed before they finished", killed)
	out := filepath.Join(e.Dir, "restored")
	e.Must("media", "restore", "--library", lib, clitest.SnapshotsJSON(t, e)[0].ID, "--to", out)
	if !clitest.SameFile(t, out, img) {
		t.Fatal("the point restores wrong from a volume written through kills")
	}
}

// Single files come back from tape through the file readers, with the
// repository gone: an ext4 disk built by mkfs.ext4 -d, backed up, copied
// to tape.
func TestMediaFilesWithoutRepository(t *testing.T) {
	testutil.RequireBinary(t, "mkfs.ext4")
	e := clitest.NewEnv(t)
	img := filepath.Join(e.Dir, "machine.raw")
	if err := demo.MakeDiskImage(e.Dir, img, 64); err != nil {
		t.Fatal(err)
	}
	e.Must("init")
	e.Must("backup", "disk", img, "--name", "m")
	point := clitest.SnapshotsJSON(t, e)[0].ID
	lib := mediaLibrary(e, 2, "64MiB")
	e.Must("media", "copy", "--library", lib, "--pool", "p")
	if err := os.RemoveAll(e.Repo); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(e.Dir, "out")
	res := clitest.Decode[api.FilesExtract](t, e.Must("media", "files", "--library", lib, point[:8]+":0", "/etc/motd", "--to", dst, "--json"))
	got, err := os.ReadFile(filepath.Join(dst, "motd"))
	if err != nil || string(got) != "welcome to the coffer demo machine\n" || res.Files != 1 {
		t.Fatalf("motd from tape: %q %v (%+v)", got, err, res)
	}
	// A path the disk does not have fails as it does for coffer files get.
	if code, _, errOut := e.Run("media", "files", "--library", lib, point[:8], "/no/such/file", "--to", dst); code == 0 || !strings.Contains(errOut, "/no/such/file") {
		t.Fatalf("a missing path: exit %d, %s", code, errOut)
	}
}

// --library takes the name of a library of the configuration as well as a
// directory: the catalogue records the name, and a name the configuration
// lacks that is no directory either is refused saying where libraries are
// listed.
func TestMediaLibraryByName(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	img := e.Image("a.img", 2<<20, 1)
	e.Must("backup", "disk", img, "--name", "a")
	lib := mediaLibrary(e, 1, "16MiB")
	e.Config("media-libraries:\n  - {name: tapes, kind: vtl, directory: " + lib + "}\n")
	if out := e.Must("media", "vtl", "status", "--library", "tapes"); !strings.Contains(out, "CFR001L8") {
		t.Fatalf("status by name: %s", out)
	}
	res := clitest.Decode[api.MediaCopyResult](t, e.Must("media", "copy", "--library", "tapes", "--pool", "p", "--json"))
	if len(res.Volumes) != 1 || res.Volumes[0].Library != "tapes" {
		t.Fatalf("copy by name: %+v", res)
	}
	// The same library by its directory still works, and is recorded so.
	rep := clitest.Decode[api.MediaVerifyReport](t, e.Must("media", "verify", "--library", lib, "CFR001L8", "--json"))
	if !rep.OK {
		t.Fatalf("verify by directory: %+v", rep)
	}
	out := filepath.Join(e.Dir, "restored")
	e.Must("media", "restore", "--library", "tapes", res.Copied[0], "--to", out)
	if !clitest.SameFile(t, out, img) {
		t.Fatal("the point restored by the library's name differs")
	}
	if code, _, errOut := e.Run("media", "volumes", "--library", "nope"); code != command.ExitUsage || !strings.Contains(errOut, "unknown flag") {
		t.Fatalf("media volumes takes no --library: %d %s", code, errOut)
	}
	if code, _, errOut := e.Run("media", "verify", "--library", "nope", "CFR001L8"); code != command.ExitNoRepo ||
		!strings.Contains(errOut, `no media library "nope" in the configuration`) {
		t.Fatalf("an unknown library: %d %s", code, errOut)
	}
}
