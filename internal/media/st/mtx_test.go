package st_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/media"
	"github.com/coffer-backup/coffer/internal/media/st"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestChangerThroughMtx: the changer runs the mtx it finds on PATH (here
// a script keeping a changer's state, printing mtx's text) and reads its
// status with the parser the VTL shares: load, unload back to the source
// slot, transfer, and mtx's refusals passed on with mtx's words; the
// library does not unload a drive it could not eject.
func TestChangerThroughMtx(t *testing.T) {
	fake := testutil.NewFakeMtx(t, 2, []string{"CFR001L8", "CFR002L8", ""}, 1)
	t.Setenv("PATH", fake.Bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	lib := &st.Library{Changer: &st.Changer{Device: fake.Changer},
		Drives: map[int]*st.Drive{0: st.Open(filepath.Join(t.TempDir(), "nst0")), 1: st.Open(filepath.Join(t.TempDir(), "nst1"))}}

	s, err := lib.Status()
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Drives) != 2 || s.Drives[1].Full || len(s.Slots) != 4 || !s.Slots[3].ImportExport || s.Slots[1].VolumeTag != "CFR002L8" {
		t.Fatalf("status: %+v", s)
	}
	if err := lib.Load(2, 1); err != nil {
		t.Fatal(err)
	}
	if err := lib.Load(1, 1); err == nil || !strings.Contains(err.Error(), "Drive 1 Full (Storage Element 2 loaded)") {
		t.Fatalf("a load into a full drive: %v", err)
	}
	if s, _ = lib.Status(); !s.Drives[1].Full || s.Drives[1].SourceSlot != 2 || s.Drives[1].VolumeTag != "CFR002L8" || s.Slots[1].Full {
		t.Fatalf("after load 2 1: %+v", s)
	}
	if err := lib.Transfer(1, 3); err != nil {
		t.Fatal(err)
	}
	// The library ejects the drive before the robot takes its cartridge:
	// a drive whose device is missing keeps it, and the robot moves
	// nothing.
	if err := lib.Unload(0, 1); !errors.Is(err, media.ErrNoDrive) || !strings.Contains(err.Error(), "eject drive 1") {
		t.Fatalf("unload from a drive that cannot eject: %v", err)
	}
	if err := lib.Changer.Unload(0, 1); err != nil { // back where it came from
		t.Fatal(err)
	}
	if s, _ = lib.Status(); s.Drives[1].Full || s.Slots[1].VolumeTag != "CFR002L8" || s.Slots[0].Full || s.Slots[2].VolumeTag != "CFR001L8" {
		t.Fatalf("after transfer 1 3 and unload: %+v", s)
	}
	if err := lib.Changer.Unload(0, 0); err == nil || !strings.Contains(err.Error(), "drive 0's source slot is unknown") {
		t.Fatalf("unloading an empty drive: %v", err)
	}
	want := []string{"status", "load 2 1", "load 1 1", "status", "transfer 1 3", "status", "unload 2 1", "status", "status"}
	if got := fake.Commands(t); !slices.Equal(got, want) {
		t.Fatalf("mtx ran %q, want %q", got, want)
	}

	other := &st.Changer{Device: filepath.Join(t.TempDir(), "sg9")}
	if _, err := other.Status(); err == nil || !strings.Contains(err.Error(), "sg9") || !strings.Contains(err.Error(), "cannot open SCSI device") {
		t.Fatalf("a changer device that is not there: %v", err)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := lib.Status(); err == nil || !strings.Contains(err.Error(), "mtx is not installed") {
		t.Fatalf("without mtx: %v", err)
	}
}

// TestChangerLock: one operation at a time holds a changer, across
// processes as within one (an flock on its device); a changer device that
// is not there is named.
func TestChangerLock(t *testing.T) {
	fake := testutil.NewFakeMtx(t, 1, []string{"CFR001L8"}, 0)
	a, b := &st.Changer{Device: fake.Changer}, &st.Changer{Device: fake.Changer}
	unlock, err := a.Lock()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lock(); !errors.Is(err, media.ErrInUse) {
		t.Fatalf("a second lock while the first is held: %v", err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	unlockB, err := b.Lock()
	if err != nil {
		t.Fatalf("the lock once released: %v", err)
	}
	unlockB()
	missing := filepath.Join(t.TempDir(), "sg9")
	if _, err := (&st.Changer{Device: missing}).Lock(); err == nil || !strings.Contains(err.Error(), "the changer's device "+missing+" does not exist") {
		t.Fatalf("a missing changer device: %v", err)
	}
}

// TestDriveDeviceMissing: a drive whose device is not there says which
// device and what to check, at its first operation; its status is that
// of an empty drive only when the device says so.
func TestDriveDeviceMissing(t *testing.T) {
	dev := filepath.Join(t.TempDir(), "nst0")
	d := st.Open(dev)
	defer d.Close()
	_, err := d.WriteRecord([]byte("x"))
	if err == nil || !strings.Contains(err.Error(), "the drive's device "+dev+" does not exist") || !strings.Contains(err.Error(), "st driver") ||
		errors.Is(err, media.ErrNoMedium) {
		t.Fatalf("write to a missing device: %v", err)
	}
	if _, err := d.Status(); err == nil || !strings.Contains(err.Error(), dev) {
		t.Fatalf("status of a missing device: %v", err)
	}
}
