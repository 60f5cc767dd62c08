package mediatest

import (
	"errors"
	"testing"

	"github.com/coffer-backup/coffer/internal/media"
)

const fillRecord = 64 << 10

// fillToWarning writes numbered records from seq until the drive answers
// the early warning, and returns the next sequence number: the refused
// record was not written.
func fillToWarning(t *testing.T, d media.Drive, seq int) int {
	t.Helper()
	for {
		_, err := d.WriteRecord(record(seq, fillRecord))
		if errors.Is(err, media.ErrEarlyWarning) {
			return seq
		}
		if err != nil {
			t.Fatalf("record %d before the early warning: %v", seq, err)
		}
		seq++
	}
}

// testEndOfMedium checks st's sequence: the write entering the
// early-warning zone succeeds and says nothing; the next fails with
// ENOSPC; one trailer is then written; then the medium has ended. Every
// record written reads back.
func testEndOfMedium(t *testing.T, s Setup) {
	load(t, s, s.Scratch[0])
	defer unload(t, s, s.Scratch[0])
	d := s.Drive
	next := fillToWarning(t, d, 0)
	if st, _ := d.Status(); !st.EarlyWarning {
		t.Fatalf("status after ENOSPC has no early warning: %+v", st)
	}
	mustWrite(t, d, record(next, 100)) // the trailer
	if _, err := d.WriteRecord(record(next+1, 100)); !errors.Is(err, media.ErrEndOfMedium) {
		t.Fatalf("write after the trailer: %v, want end of medium", err)
	}
	mustMarks(t, d, 1)
	if err := d.Rewind(); err != nil {
		t.Fatal(err)
	}
	for i := range next {
		expectRecord(t, d, record(i, fillRecord))
	}
	expectRecord(t, d, record(next, 100))
	expectErr(t, d, media.ErrFilemark)
	expectErr(t, d, media.ErrEOD)
}

// testFill is btape's fill: a volume written to its end, the stream
// continued on a second one, and both read back as one sequence.
func testFill(t *testing.T, s Setup) {
	load(t, s, s.Scratch[0])
	first := fillToWarning(t, s.Drive, 0)
	mustMarks(t, s.Drive, 1)
	unload(t, s, s.Scratch[0])

	load(t, s, s.Scratch[1])
	const more = 10
	for i := range more {
		mustWrite(t, s.Drive, record(first+i, fillRecord))
	}
	mustMarks(t, s.Drive, 1)
	unload(t, s, s.Scratch[1])

	seq := 0
	for _, slot := range s.Scratch {
		load(t, s, slot)
		for {
			buf := make([]byte, fillRecord)
			n, err := s.Drive.ReadRecord(buf)
			if errors.Is(err, media.ErrFilemark) {
				break
			}
			if err != nil {
				t.Fatalf("slot %d, record %d: %v", slot, seq, err)
			}
			want := record(seq, fillRecord)
			if n != fillRecord || string(buf) != string(want) {
				t.Fatalf("slot %d: record %d is not the one written", slot, seq)
			}
			seq++
		}
		expectErr(t, s.Drive, media.ErrEOD)
		unload(t, s, slot)
	}
	if seq != first+more {
		t.Fatalf("read %d records back, wrote %d", seq, first+more)
	}
}
