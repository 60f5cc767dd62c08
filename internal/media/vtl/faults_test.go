package vtl_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/media"
	"github.com/coffer-backup/coffer/internal/media/vtl"
)

func loaded(t *testing.T, l *vtl.Library, slot int) *vtl.Drive {
	t.Helper()
	if err := l.Load(slot, 0); err != nil {
		t.Fatal(err)
	}
	d, err := l.Drive(0)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func payload(i, n int) []byte { return bytes.Repeat([]byte{byte(i + 1)}, n) }

// A write torn by a crash leaves a short last record after reopening; the
// records before it are intact and a write over it replaces it.
func TestTornWriteAfterReopen(t *testing.T) {
	cfg := vtl.Config{Drives: 1, Slots: 2, Capacity: 1 << 20}
	l := newLibrary(t, cfg, 1)
	d := loaded(t, l, 1)
	l.Faults().TornWriteAfter(2)
	for i := range 2 {
		if _, err := d.WriteRecord(payload(i, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.WriteRecord(payload(2, 1000)); !errors.Is(err, vtl.ErrCrashed) {
		t.Fatalf("torn write: %v", err)
	}
	if _, err := d.Tell(); !errors.Is(err, vtl.ErrCrashed) {
		t.Fatalf("drive after the crash: %v", err)
	}
	dir := l.Dir()
	l.Close()

	l2, err := vtl.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	d, _ = l2.Drive(0) // still loaded, as after a restart
	buf := make([]byte, 2000)
	for i := range 2 {
		n, err := d.ReadRecord(buf)
		if err != nil || !bytes.Equal(buf[:n], payload(i, 1000)) {
			t.Fatalf("record %d after the crash: %d, %v", i, n, err)
		}
	}
	n, err := d.ReadRecord(buf)
	if err != nil || n != 500 {
		t.Fatalf("torn record: %d bytes, %v; want the 500 that reached the file", n, err)
	}
	if _, err := d.ReadRecord(buf); !errors.Is(err, media.ErrEOD) {
		t.Fatalf("after the torn record: %v", err)
	}
	if err := d.Locate(2); err != nil {
		t.Fatal(err)
	}
	if _, err := d.WriteRecord(payload(2, 1000)); err != nil {
		t.Fatal(err)
	}
	d.Locate(2)
	if n, err := d.ReadRecord(buf); err != nil || !bytes.Equal(buf[:n], payload(2, 1000)) {
		t.Fatalf("rewritten record: %d, %v", n, err)
	}
}

// An injected read error fails one record, past which reading goes on.
func TestReadErrorAtBlock(t *testing.T) {
	l := newLibrary(t, vtl.Config{Drives: 1, Slots: 2, Capacity: 1 << 20}, 1)
	d := loaded(t, l, 1)
	for i := range 4 {
		d.WriteRecord(payload(i, 100))
	}
	l.Faults().ReadErrorAt(barcode(1), 2)
	d.Rewind()
	buf := make([]byte, 200)
	for i := range 4 {
		n, err := d.ReadRecord(buf)
		if i == 2 {
			if !errors.Is(err, media.ErrMedium) {
				t.Fatalf("record 2: %v, want a medium error", err)
			}
			continue
		}
		if err != nil || !bytes.Equal(buf[:n], payload(i, 100)) {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if a, _ := d.AlertFlags(); !a.HardError {
		t.Fatal("no hard-error alert after a read error")
	}
	if d.Stats().ReadErrors != 1 {
		t.Fatalf("read errors: %d", d.Stats().ReadErrors)
	}
}

// Bytes changed in the cartridge file read as a medium error, not as data.
func TestDamagedCartridgeFile(t *testing.T) {
	l := newLibrary(t, vtl.Config{Drives: 1, Slots: 2, Capacity: 1 << 20}, 1)
	d := loaded(t, l, 1)
	d.WriteRecord(payload(0, 100))
	d.WriteRecord(payload(1, 100))
	if err := l.Unload(0, 0); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(l.Dir(), barcode(1)+".tape")
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0xff}, 17+100+17+50) // inside the second record's payload
	f.Close()
	d = loaded(t, l, 1)
	buf := make([]byte, 200)
	if _, err := d.ReadRecord(buf); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ReadRecord(buf); !errors.Is(err, media.ErrMedium) {
		t.Fatalf("damaged record: %v", err)
	}
}

// An unexpected end of medium comes without the early warning.
func TestUnexpectedEndOfMedium(t *testing.T) {
	l := newLibrary(t, vtl.Config{Drives: 1, Slots: 2, Capacity: 1 << 20}, 1)
	l.Faults().EndOfMediumAt(barcode(1), 1000)
	d := loaded(t, l, 1)
	for i := range 9 {
		if _, err := d.WriteRecord(payload(i, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.WriteRecord(payload(9, 101)); !errors.Is(err, media.ErrEndOfMedium) {
		t.Fatalf("write past the injected end: %v", err)
	}
	if st, _ := d.Status(); st.EarlyWarning || st.Used != 900 {
		t.Fatalf("status: %+v", st)
	}
}

// A busy changer refuses, and the retry succeeds.
func TestBusyChanger(t *testing.T) {
	l := newLibrary(t, vtl.Config{Drives: 1, Slots: 2, Capacity: 1 << 20}, 1)
	l.Faults().ChangerBusy(1)
	if err := l.Load(1, 0); !errors.Is(err, media.ErrBusy) {
		t.Fatalf("load on a busy changer: %v", err)
	}
	if st, _ := l.Status(); st.Drives[0].Full {
		t.Fatal("a refused load moved the cartridge")
	}
	if err := l.Load(1, 0); err != nil {
		t.Fatal(err)
	}
}

// A WORM cartridge appends but never overwrites.
func TestWORM(t *testing.T) {
	l := newLibrary(t, vtl.Config{Drives: 1, Slots: 2, Capacity: 1 << 20}, 0)
	if err := l.AddCartridge("WORM01L8", 1, vtl.CartridgeInfo{WORM: true}); err != nil {
		t.Fatal(err)
	}
	d := loaded(t, l, 1)
	d.WriteRecord(payload(0, 10))
	d.WriteFilemarks(1, true)
	d.Rewind()
	if _, err := d.WriteRecord(payload(1, 10)); !errors.Is(err, media.ErrWriteProtected) {
		t.Fatalf("overwrite on WORM: %v", err)
	}
	if err := d.WriteFilemarks(1, false); !errors.Is(err, media.ErrWriteProtected) {
		t.Fatalf("filemark over WORM data: %v", err)
	}
	d.SeekEOD()
	if _, err := d.WriteRecord(payload(2, 10)); err != nil {
		t.Fatalf("append on WORM: %v", err)
	}
	if st, _ := d.Status(); !st.WORM || st.Used != 20 {
		t.Fatalf("status: %+v", st)
	}
}

// The drive's time follows its configured rate and repositioning cost:
// the modelled time of a sequential write is its bytes at the rate, and a
// locate back costs the configured reposition time on top of the distance.
func TestRateModel(t *testing.T) {
	cfg := vtl.Config{Drives: 1, Slots: 2, Capacity: 8 << 20, Rate: 1 << 20, RepositionTime: 50 * time.Millisecond, LocateRate: 4 << 20}
	l := newLibrary(t, cfg, 1)
	d := loaded(t, l, 1)
	for range 16 {
		d.WriteRecord(make([]byte, 64<<10))
	}
	written := d.Stats()
	perRate := func(bytes float64, rate int64) time.Duration {
		return time.Duration(bytes / float64(rate) * float64(time.Second))
	}
	if written.Busy != perRate(16*64<<10, cfg.Rate) || written.Repositions != 0 {
		t.Fatalf("writing the rate's bytes: busy %v, %d repositions", written.Busy, written.Repositions)
	}
	d.Rewind()
	st := d.Stats()
	// Distance: 16 entries of 64 KiB and their headers, at 4 MiB/s.
	dist := perRate(16*(64<<10+17), cfg.LocateRate) // records and their 17-byte entry headers
	if got, want := st.Busy-written.Busy, cfg.RepositionTime+dist; got != want || st.Repositions != 1 {
		t.Fatalf("rewind cost %v (%d repositions), want %v", got, st.Repositions, want)
	}
}

// The library keeps its inventory across a reopen, and one process holds
// it at a time.
func TestReopenAndLock(t *testing.T) {
	l := newLibrary(t, vtl.Config{Drives: 1, Slots: 3, Capacity: 1 << 20}, 2)
	if err := l.Transfer(2, 3); err != nil {
		t.Fatal(err)
	}
	if err := l.Load(1, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := vtl.Open(l.Dir()); err == nil {
		t.Fatal("a second open of a library in use succeeded")
	}
	before := l.StatusText()
	l.Close()
	l2, err := vtl.Open(l.Dir())
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if after := l2.StatusText(); after != before {
		t.Fatalf("status after reopen:\n%s\nbefore:\n%s", after, before)
	}
	st, _ := l2.Status()
	if drv, _, ok := st.FindVolume(barcode(1)); !ok || drv != 0 {
		t.Fatal("the loaded cartridge is not in its drive after reopen")
	}
	if info, _ := l2.Cartridge(barcode(1)); info.Loads != 1 {
		t.Fatalf("load count %d", info.Loads)
	}
}

// A damaged entry header loses its record only: the records after it
// still read, as past a damaged stretch of tape.
func TestDamagedEntryHeaderLosesOneRecord(t *testing.T) {
	l := newLibrary(t, vtl.Config{Drives: 1, Slots: 2, Capacity: 1 << 20}, 1)
	d := loaded(t, l, 1)
	for i := range 3 {
		d.WriteRecord(payload(i, 100))
	}
	d.WriteFilemarks(1, true)
	l.Unload(0, 0)
	f, err := os.OpenFile(filepath.Join(l.Dir(), barcode(1)+".tape"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{'X'}, 17+100+1) // the second entry's magic
	f.Close()
	d = loaded(t, l, 1)
	buf := make([]byte, 200)
	if n, err := d.ReadRecord(buf); err != nil || !bytes.Equal(buf[:n], payload(0, 100)) {
		t.Fatalf("record 0: %v", err)
	}
	if _, err := d.ReadRecord(buf); !errors.Is(err, media.ErrMedium) {
		t.Fatalf("the damaged record: %v", err)
	}
	if n, err := d.ReadRecord(buf); err != nil || !bytes.Equal(buf[:n], payload(2, 100)) {
		t.Fatalf("record 2 after the damage: %v", err)
	}
	if _, err := d.ReadRecord(buf); !errors.Is(err, media.ErrFilemark) {
		t.Fatalf("the filemark after the damage: %v", err)
	}
}
