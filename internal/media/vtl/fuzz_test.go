package vtl_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/coffer-backup/coffer/internal/media"
	"github.com/coffer-backup/coffer/internal/media/vtl"
)

// FuzzCartridgeFile loads arbitrary bytes as a cartridge file: the drive
// reads records, filemarks, medium errors and end of data from it, never
// anything else, and never hangs or panics.
func FuzzCartridgeFile(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("CFTE\x01\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00abcCFTE"))
	f.Add([]byte{7, 7, 7})
	f.Add(validCartridge())
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := vtl.Create(dir, vtl.Config{Drives: 1, Slots: 1, Capacity: 1 << 20}); err != nil {
			t.Fatal(err)
		}
		l, err := vtl.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if err := l.AddCartridge("FUZZ", 1, vtl.CartridgeInfo{}); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "FUZZ.tape"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := l.Load(1, 0); err != nil {
			t.Fatal(err)
		}
		d, _ := l.Drive(0)
		buf := make([]byte, 1<<16)
		for i := 0; i <= len(data); i++ {
			_, err := d.ReadRecord(buf)
			switch {
			case errors.Is(err, media.ErrEOD):
				return
			case err == nil, errors.Is(err, media.ErrFilemark), errors.Is(err, media.ErrMedium), errors.Is(err, media.ErrShortBuffer):
			default:
				t.Fatalf("read: %v", err)
			}
		}
		t.Fatal("more objects than bytes in the file")
	})
}

// validCartridge is a cartridge file as the drive writes it: two records,
// a filemark, a record.
func validCartridge() []byte {
	dir, _ := os.MkdirTemp("", "fuzzseed")
	defer os.RemoveAll(dir)
	vtl.Create(dir, vtl.Config{Drives: 1, Slots: 1, Capacity: 1 << 20})
	l, err := vtl.Open(dir)
	if err != nil {
		return nil
	}
	l.AddCartridge("SEED", 1, vtl.CartridgeInfo{})
	l.Load(1, 0)
	d, _ := l.Drive(0)
	d.WriteRecord([]byte("first"))
	d.WriteRecord([]byte("second"))
	d.WriteFilemarks(1, true)
	d.WriteRecord([]byte("third"))
	l.Close()
	b, _ := os.ReadFile(filepath.Join(dir, "SEED.tape"))
	return b
}
