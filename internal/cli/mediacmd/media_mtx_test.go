package mediacmd_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/media/st"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestMediaRealLibraryByName: a real library of the configuration (kind
// mtx: a changer and its st drives by the changer's numbers) is named
// like a VTL by every media command. No changer is attached here: mtx is
// a script keeping a changer's state and printing mtx's text, so the
// changer's side runs for real (status, and the loads and unloads that
// label, verify and the catalogue's rebuild ask for), and the drives'
// devices do not exist, which each operation reports naming the device.
// A library with a mistake is refused whether it comes from the file or
// from `config create`, with what to change.
func TestMediaRealLibraryByName(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Vars["COFFER_STATE_DIR"] = t.TempDir()
	e.Must("init")
	img := e.Image("a.img", 1<<20, 1)
	e.Must("backup", "disk", img, "--name", "a")
	e.Must("backup", "disk", img, "--name", "b")
	fake := testutil.NewFakeMtx(t, 2, []string{"CFR001L8", "CFR002L8", "", ""}, 1)
	e.Vars["PATH"] = fake.Bin + string(os.PathListSeparator) + os.Getenv("PATH")
	nst0, nst1 := filepath.Join(e.Dir, "nst0"), filepath.Join(e.Dir, "nst1")
	e.Config("media-libraries:\n  - name: robot\n    kind: mtx\n    changer: " + fake.Changer + "\n" +
		"    drives:\n      - {number: 0, device: " + nst0 + "}\n      - {number: 1, device: " + nst1 + "}\n")

	status := clitest.Decode[api.MediaLibraryStatus](t, e.Must("media", "vtl", "status", "--library", "robot", "--json"))
	if status.Library != "robot" || status.Kind != "mtx" || len(status.Drives) != 2 || status.Drives[0].Full || len(status.Slots) != 5 ||
		status.Slots[0].Barcode != "CFR001L8" || !status.Slots[4].ImportExport {
		t.Fatalf("status of the real library: %+v", status)
	}
	if out := e.Must("media", "vtl", "status", "--library", "robot"); !strings.Contains(out, "Data Transfer Element 1:Empty") {
		t.Fatalf("status as mtx prints it:\n%s", out)
	}
	// Another operation (here, the test) holds the changer: busy, not
	// broken.
	unlock, err := (&st.Changer{Device: fake.Changer}).Lock()
	if err != nil {
		t.Fatal(err)
	}
	if out := e.Expect(command.ExitLocked, "media", "vtl", "status", "--library", "robot"); !strings.Contains(out, "media library robot is in use by another operation") {
		t.Fatalf("status while another operation holds the changer:\n%s", out)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}

	// The robot loads the cartridge; the drive that should label it is
	// not there.
	out := e.Expect(7, "media", "label", "--library", "robot", "--drive", "1", "--barcode", "CFR002L8", "--pool", "weekly")
	if !strings.Contains(out, "the drive's device "+nst1+" does not exist") || !strings.Contains(out, "st driver") {
		t.Fatalf("label on a drive whose device is missing:\n%s", out)
	}
	status = clitest.Decode[api.MediaLibraryStatus](t, e.Must("media", "vtl", "status", "--library", "robot", "--json"))
	if !status.Drives[1].Full || status.Drives[1].Barcode != "CFR002L8" || status.Drives[1].SourceSlot != 2 {
		t.Fatalf("after the label the changer holds CFR002L8 in drive 1: %+v", status.Drives)
	}
	// Verify on drive 0 would take the cartridge back from drive 1 first,
	// which must eject it (st's offline) before the robot moves it.
	out = e.Expect(7, "media", "verify", "--library", "robot", "CFR002L8")
	if !strings.Contains(out, "cartridge CFR002L8 is in drive 1, which does not give it back") || !strings.Contains(out, "the drive's device "+nst1+" does not exist") {
		t.Fatalf("verify on drive 0:\n%s", out)
	}
	// Every cartridge would fail alike: the rebuild and the copy stop at
	// the first, naming the drive's device, not the cartridges.
	out = e.Expect(7, "media", "catalog", "--library", "robot", "--drive", "1")
	if !strings.Contains(out, "the drive's device "+nst1+" does not exist") {
		t.Fatalf("catalogue rebuilt from the real library:\n%s", out)
	}
	out = e.Expect(7, "media", "copy", "--library", "robot", "--pool", "weekly", "--latest", "--drive", "1")
	if !strings.Contains(out, "the drive's device "+nst1+" does not exist") || strings.Contains(out, "blank cartridges") {
		t.Fatalf("copy to the real library:\n%s", out)
	}
	// label: into drive 1; nothing after it: the robot never moves a
	// cartridge its drive has not ejected.
	wantMoves := []string{"load 2 1"}
	var moves []string
	for _, c := range fake.Commands(t) {
		if c != "status" {
			moves = append(moves, c)
		}
	}
	if !slices.Equal(moves, wantMoves) {
		t.Fatalf("the robot's moves: %q, want %q", moves, wantMoves)
	}
	out = e.Expect(2, "media", "label", "--library", "robot", "--drive", "4", "--barcode", "CFR001L8", "--pool", "weekly")
	if !strings.Contains(out, "media library robot has no drive 4: its drives are 0, 1") {
		t.Fatalf("a drive the library does not list:\n%s", out)
	}
	out = e.Expect(2, "media", "copy", "--library", "robot", "--pool", "weekly", "--drive", "1", "--drives", "2")
	if !strings.Contains(out, "2 drives from drive 1: media library robot has 1 (drives 1)") {
		t.Fatalf("more drives than the library lists:\n%s", out)
	}

	// By hand: the robot loads a cartridge into an empty drive; taking it
	// out again needs the drive to eject it first, which a missing drive
	// cannot do, so the cartridge stays and the error names the device.
	status = clitest.Decode[api.MediaLibraryStatus](t, e.Must("media", "load", "--library", "robot", "CFR001L8", "--json"))
	if !status.Drives[0].Full || status.Drives[0].Barcode != "CFR001L8" || status.Slots[0].Full {
		t.Fatalf("after media load: %+v", status)
	}
	if out := e.Expect(7, "media", "unload", "--library", "robot"); !strings.Contains(out, "the drive's device "+nst0+" does not exist") {
		t.Fatalf("unload of a drive whose device is missing:\n%s", out)
	}
	if out := e.Expect(7, "media", "load", "--library", "robot", "--drive", "1", "CFR009L8"); !strings.Contains(out, "media library robot holds no cartridge CFR009L8") {
		t.Fatalf("load of a cartridge the library does not hold:\n%s", out)
	}

	// Through the configuration objects (the API's and the console's
	// way): the same checks, the same library once created.
	spec := func(name, doc string) string {
		p := filepath.Join(e.Dir, name)
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := spec("bad.yaml", "name: robot2\nkind: mtx\nchanger: "+fake.Changer+"\ndirectory: /srv/vtl\n"+
		"drives: [{number: 0, device: /dev/nst0}, {number: 0, device: /dev/nst1}]\n")
	out = e.Expect(2, "config", "create", "media-library", "-f", bad)
	for _, want := range []string{"directory belongs to a virtual tape library (kind: vtl)", "drives[1]: drive 0 is named twice"} {
		if !strings.Contains(out, want) {
			t.Fatalf("a library with mistakes through config create:\n%s\nwant %q", out, want)
		}
	}
	e.Must("config", "create", "media-library", "-f", spec("good.yaml", "name: robot2\nkind: mtx\nchanger: "+fake.Changer+"\n"+
		"drives: [{number: 1, device: "+nst1+"}]\n"))
	// Its only drive is number 1: the default drive.
	status = clitest.Decode[api.MediaLibraryStatus](t, e.Must("media", "vtl", "status", "--library", "robot2", "--json"))
	if status.Library != "robot2" || status.Kind != "mtx" || len(status.Slots) != 5 {
		t.Fatalf("status of the library made through config create: %+v", status)
	}

	e.Config("media-libraries:\n  - {name: robot, kind: mtx, changer: " + fake.Changer + "}\n")
	if out := e.Expect(2, "media", "vtl", "status", "--library", "robot"); !strings.Contains(out, "media library robot: drives are missing") {
		t.Fatalf("a real library without drives in the file:\n%s", out)
	}
}

// coffer media load and unload move a virtual library's cartridges as
// mtx does a real one's: a load into a full drive returns its cartridge
// first, an unload puts the cartridge back in its slot, an empty drive
// has nothing to unload.
func TestMediaLoadUnload(t *testing.T) {
	e := clitest.NewEnv(t)
	lib := mediaLibrary(e, 2, "16MiB")
	e.Config("media-libraries:\n  - {name: tapes, kind: vtl, directory: " + lib + "}\n")
	status := clitest.Decode[api.MediaLibraryStatus](t, e.Must("media", "load", "--library", "tapes", "CFR001L8", "--json"))
	if !status.Drives[0].Full || status.Drives[0].Barcode != "CFR001L8" || status.Drives[0].SourceSlot != 1 || status.Slots[0].Full {
		t.Fatalf("after load CFR001L8: %+v", status)
	}
	status = clitest.Decode[api.MediaLibraryStatus](t, e.Must("media", "load", "--library", "tapes", "CFR002L8", "--json"))
	if status.Drives[0].Barcode != "CFR002L8" || status.Slots[0].Barcode != "CFR001L8" || status.Slots[1].Full {
		t.Fatalf("after load CFR002L8 into the full drive: %+v", status)
	}
	if out := e.Must("media", "unload", "--library", "tapes"); !strings.Contains(out, "Data Transfer Element 0:Empty") ||
		!strings.Contains(out, "Storage Element 2:Full :VolumeTag=CFR002L8") {
		t.Fatalf("after unload:\n%s", out)
	}
	if out := e.Expect(2, "media", "unload", "--library", "tapes"); !strings.Contains(out, "drive 0 of media library tapes holds no cartridge") {
		t.Fatalf("unload of an empty drive:\n%s", out)
	}
}
