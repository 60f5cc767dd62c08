// Package mediatest is the conformance suite every media.Drive and
// media.Changer must pass, modelled on Bareos' `btape test` and `fill`:
// records and filemarks written and read back, positioning, the st
// end-of-medium sequence, a volume filled and continued on a second one,
// and the changer's moves. The VTL runs it in CI (vtl/conformance_test.go);
// a real drive and changer run it by hand (docs/09-tape.md).
//
// The suite overwrites the cartridges it is given.
package mediatest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/coffer-backup/coffer/internal/media"
)

// Setup is what the suite works on.
type Setup struct {
	Changer media.Changer
	// Drive is the changer's drive DriveIndex.
	Drive      media.Drive
	DriveIndex int
	// Scratch are two slots holding cartridges the suite may overwrite;
	// they must be in their slots when the suite starts.
	Scratch [2]int
	// Fill runs the tests that write a cartridge to its end (hours on a
	// real LTO cartridge; seconds on a small VTL one).
	Fill bool
	// SetWriteProtected, if the library can, sets a cartridge's tab; the
	// write-protection test is skipped without it.
	SetWriteProtected func(barcode string, on bool) error
}

// Run runs the whole suite.
func Run(t *testing.T, s Setup) {
	t.Run("changer", func(t *testing.T) { testChanger(t, s) })
	t.Run("records", func(t *testing.T) { testRecords(t, s) })
	t.Run("positioning", func(t *testing.T) { testPositioning(t, s) })
	t.Run("overwrite", func(t *testing.T) { testOverwrite(t, s) })
	t.Run("write-protect", func(t *testing.T) { testWriteProtect(t, s) })
	if s.Fill {
		t.Run("end-of-medium", func(t *testing.T) { testEndOfMedium(t, s) })
		t.Run("fill", func(t *testing.T) { testFill(t, s) })
	}
}

// record makes a record of n bytes that names its sequence number, so a
// record read back in the wrong place is seen.
func record(seq, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(seq*31 + i*7)
	}
	if n >= 8 {
		binary.LittleEndian.PutUint64(b, uint64(seq))
	}
	return b
}

// load puts the cartridge of slot into the drive and rewinds.
func load(t *testing.T, s Setup, slot int) string {
	t.Helper()
	st, err := s.Changer.Status()
	if err != nil {
		t.Fatal(err)
	}
	for _, sl := range st.Slots {
		if sl.Number == slot && !sl.Full {
			t.Fatalf("scratch slot %d is empty", slot)
		}
	}
	var tag string
	for _, sl := range st.Slots {
		if sl.Number == slot {
			tag = sl.VolumeTag
		}
	}
	if err := s.Changer.Load(slot, s.DriveIndex); err != nil {
		t.Fatalf("load slot %d: %v", slot, err)
	}
	if err := s.Drive.Rewind(); err != nil {
		t.Fatal(err)
	}
	return tag
}

func unload(t *testing.T, s Setup, slot int) {
	t.Helper()
	if err := s.Changer.Unload(slot, s.DriveIndex); err != nil {
		t.Fatalf("unload to slot %d: %v", slot, err)
	}
}

func mustWrite(t *testing.T, d media.Drive, p []byte) {
	t.Helper()
	n, err := d.WriteRecord(p)
	if err != nil || n != len(p) {
		t.Fatalf("write of %d bytes: %d, %v", len(p), n, err)
	}
}

func mustMarks(t *testing.T, d media.Drive, n int) {
	t.Helper()
	if err := d.WriteFilemarks(n, true); err != nil {
		t.Fatalf("write %d filemarks: %v", n, err)
	}
}

// expectRecord reads one record and compares it.
func expectRecord(t *testing.T, d media.Drive, want []byte) {
	t.Helper()
	buf := make([]byte, len(want)+1024)
	n, err := d.ReadRecord(buf)
	if err != nil {
		t.Fatalf("read, want a record of %d bytes: %v", len(want), err)
	}
	if !bytes.Equal(buf[:n], want) {
		t.Fatalf("read %d bytes, not the %d written", n, len(want))
	}
}

// expectErr reads one record and wants err.
func expectErr(t *testing.T, d media.Drive, want error) {
	t.Helper()
	buf := make([]byte, 1<<20)
	if n, err := d.ReadRecord(buf); !errors.Is(err, want) {
		t.Fatalf("read: got %d bytes, %v; want %v", n, err, want)
	}
}

func tell(t *testing.T, d media.Drive) int64 {
	t.Helper()
	p, err := d.Tell()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
