package mediatest

import (
	"errors"
	"testing"

	"github.com/coffer-backup/coffer/internal/media"
)

// testChanger moves a cartridge through a drive and between slots and
// checks the inventory after each move.
func testChanger(t *testing.T, s Setup) {
	st, err := s.Changer.Status()
	if err != nil {
		t.Fatal(err)
	}
	a, b := s.Scratch[0], s.Scratch[1]
	tagA := ""
	free := 0
	for _, sl := range st.Slots {
		if sl.Number == a {
			tagA = sl.VolumeTag
		}
		if !sl.Full && !sl.ImportExport && free == 0 {
			free = sl.Number
		}
	}
	if err := s.Changer.Inventory(); err != nil {
		t.Fatal(err)
	}
	if err := s.Changer.Load(a, s.DriveIndex); err != nil {
		t.Fatal(err)
	}
	st, err = s.Changer.Status()
	if err != nil {
		t.Fatal(err)
	}
	d := st.Drives[s.DriveIndex]
	if !d.Full || d.SourceSlot != a || (tagA != "" && d.VolumeTag != tagA) {
		t.Fatalf("after load from slot %d (%q): drive %+v", a, tagA, d)
	}
	if tagA != "" {
		if drv, _, ok := st.FindVolume(tagA); !ok || drv != s.DriveIndex {
			t.Fatalf("%s not found in drive %d", tagA, s.DriveIndex)
		}
	}
	if err := s.Changer.Load(b, s.DriveIndex); err == nil {
		t.Fatal("loading into a full drive succeeded")
	}
	if st, _ := s.Drive.Status(); !st.Loaded || !st.BOT {
		t.Fatalf("drive status after load: %+v", st)
	}
	unload(t, s, 0)
	if st, _ := s.Drive.Status(); st.Loaded {
		t.Fatal("drive still loaded after unload")
	}
	if _, err := s.Drive.Tell(); !errors.Is(err, media.ErrNoMedium) {
		t.Fatalf("tell on an empty drive: %v", err)
	}
	if err := s.Changer.Transfer(a, b); err == nil {
		t.Fatal("transfer into a full slot succeeded")
	}
	if free == 0 {
		t.Skip("no free storage slot to test transfer")
	}
	if err := s.Changer.Transfer(a, free); err != nil {
		t.Fatal(err)
	}
	st, _ = s.Changer.Status()
	if _, slot, ok := st.FindVolume(tagA); tagA != "" && (!ok || slot != free) {
		t.Fatalf("%s after transfer to slot %d: slot %d", tagA, free, slot)
	}
	if err := s.Changer.Transfer(free, a); err != nil {
		t.Fatal(err)
	}
}

// testRecords is btape's test: records of several sizes and filemarks,
// read back in order, with end of data after them.
func testRecords(t *testing.T, s Setup) {
	load(t, s, s.Scratch[0])
	defer unload(t, s, s.Scratch[0])
	d := s.Drive
	sizes := []int{1, 512, 64512, 262144, 3}
	for i, n := range sizes {
		mustWrite(t, d, record(i, n))
	}
	mustMarks(t, d, 1)
	mustWrite(t, d, record(100, 1000))
	mustMarks(t, d, 1)
	if err := d.Rewind(); err != nil {
		t.Fatal(err)
	}
	for i, n := range sizes {
		expectRecord(t, d, record(i, n))
	}
	expectErr(t, d, media.ErrFilemark)
	expectRecord(t, d, record(100, 1000))
	expectErr(t, d, media.ErrFilemark)
	expectErr(t, d, media.ErrEOD)
	st, err := d.Status()
	if err != nil {
		t.Fatal(err)
	}
	if !st.EOD || st.FileNo != 2 || st.BlockNo != 0 {
		t.Fatalf("status at end of data: %+v", st)
	}
	// A buffer smaller than the record: st's ENOMEM, and the record is
	// passed.
	if err := d.Rewind(); err != nil {
		t.Fatal(err)
	}
	mustSkipShort(t, d)
	expectRecord(t, d, record(1, 512))
}

func mustSkipShort(t *testing.T, d media.Drive) {
	t.Helper()
	small := make([]byte, 0)
	if _, err := d.ReadRecord(small); !errors.Is(err, media.ErrShortBuffer) {
		t.Fatalf("reading a record into a short buffer: %v", err)
	}
}

// testPositioning: tell and locate, spacing by records and filemarks both
// ways, seek to end of data and append.
func testPositioning(t *testing.T, s Setup) {
	load(t, s, s.Scratch[0])
	defer unload(t, s, s.Scratch[0])
	d := s.Drive
	// Three files of 3 records each.
	var pos [3][3]int64
	for f := range 3 {
		for r := range 3 {
			pos[f][r] = tell(t, d)
			mustWrite(t, d, record(f*10+r, 100+r))
		}
		mustMarks(t, d, 1)
	}
	if err := d.Locate(pos[1][2]); err != nil {
		t.Fatal(err)
	}
	expectRecord(t, d, record(12, 102))
	if err := d.Rewind(); err != nil {
		t.Fatal(err)
	}
	if err := d.SpaceFilemarks(2); err != nil {
		t.Fatal(err)
	}
	if got := tell(t, d); got != pos[2][0] {
		t.Fatalf("after spacing 2 filemarks: position %d, want %d", got, pos[2][0])
	}
	if err := d.SpaceRecords(1); err != nil {
		t.Fatal(err)
	}
	expectRecord(t, d, record(21, 101))
	// Back over records: stops on the near side of a filemark.
	if err := d.SpaceRecords(-5); !errors.Is(err, media.ErrFilemark) {
		t.Fatalf("spacing back 5 records over a filemark: %v", err)
	}
	if err := d.SpaceRecords(-1); err != nil {
		t.Fatal(err)
	}
	expectRecord(t, d, record(12, 102))
	// Forward over records: stops past a filemark.
	if err := d.SpaceRecords(2); !errors.Is(err, media.ErrFilemark) {
		t.Fatalf("spacing 2 records over a filemark: %v", err)
	}
	expectRecord(t, d, record(20, 100))
	if err := d.SpaceFilemarks(-2); err != nil {
		t.Fatal(err)
	}
	expectErr(t, d, media.ErrFilemark)
	expectRecord(t, d, record(10, 100))
	if err := d.SpaceFilemarks(-10); !errors.Is(err, media.ErrBOT) {
		t.Fatalf("spacing back past the beginning: %v", err)
	}
	if err := d.SpaceFilemarks(10); !errors.Is(err, media.ErrEOD) {
		t.Fatalf("spacing past the end of data: %v", err)
	}
	if err := d.SeekEOD(); err != nil {
		t.Fatal(err)
	}
	end := tell(t, d)
	mustWrite(t, d, record(30, 50))
	mustMarks(t, d, 1)
	if err := d.Locate(end); err != nil {
		t.Fatal(err)
	}
	expectRecord(t, d, record(30, 50))
	expectErr(t, d, media.ErrFilemark)
	expectErr(t, d, media.ErrEOD)
	if err := d.Locate(end + 100); err == nil {
		t.Fatal("locating beyond the end of data succeeded")
	}
}

// testOverwrite: a write in the middle erases everything after it.
func testOverwrite(t *testing.T, s Setup) {
	load(t, s, s.Scratch[0])
	defer unload(t, s, s.Scratch[0])
	d := s.Drive
	for i := range 5 {
		mustWrite(t, d, record(i, 200))
	}
	mustMarks(t, d, 1)
	if err := d.Locate(2); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, d, record(99, 300))
	if err := d.Locate(1); err != nil {
		t.Fatal(err)
	}
	expectRecord(t, d, record(1, 200))
	expectRecord(t, d, record(99, 300))
	expectErr(t, d, media.ErrEOD)
}

func testWriteProtect(t *testing.T, s Setup) {
	if s.SetWriteProtected == nil {
		t.Skip("the library cannot set a write-protect tab")
	}
	tag := load(t, s, s.Scratch[1])
	mustWrite(t, s.Drive, record(1, 10))
	unload(t, s, s.Scratch[1])
	if err := s.SetWriteProtected(tag, true); err != nil {
		t.Fatal(err)
	}
	load(t, s, s.Scratch[1])
	if st, _ := s.Drive.Status(); !st.WriteProtected {
		t.Fatal("status does not say write protected")
	}
	if _, err := s.Drive.WriteRecord(record(2, 10)); !errors.Is(err, media.ErrWriteProtected) {
		t.Fatalf("write to a protected cartridge: %v", err)
	}
	if err := s.Drive.WriteFilemarks(1, true); !errors.Is(err, media.ErrWriteProtected) {
		t.Fatalf("filemark on a protected cartridge: %v", err)
	}
	expectRecord(t, s.Drive, record(1, 10))
	unload(t, s, s.Scratch[1])
	if err := s.SetWriteProtected(tag, false); err != nil {
		t.Fatal(err)
	}
}
