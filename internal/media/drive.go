// Package media is coffer's layer for sequential media: tape drives and
// the changers (robots) that move cartridges between slots and drives.
//
// The Drive interface follows the semantics of the Linux st driver in
// variable-block mode (Documentation/scsi/st.rst), so that a real drive
// behind /dev/nst* fits without changing callers: every write is one
// record, filemarks separate tape files, end of data is reported once the
// written data ends, and the end of the medium is announced early. The
// Changer interface follows mtx, and its status text is parsed by the code
// that parses a real `mtx status` (mtxstatus.go).
//
// The file-backed virtual tape library in media/vtl implements both, and
// media/mediatest is the conformance suite every implementation must pass.
package media

import (
	"errors"
	"time"
)

// Errors of a drive. They stand for the errno values of st, so that callers
// written against the VTL behave the same on a real drive.
var (
	// ErrFilemark: a read or a record space met a filemark; the position is
	// past it going forward, before it going backward (st: a zero-byte read).
	ErrFilemark = errors.New("media: filemark")
	// ErrEOD: there is no more recorded data (st: the second consecutive
	// zero-byte read, or a blank check).
	ErrEOD = errors.New("media: end of data")
	// ErrBOT: a backward space reached the beginning of the tape.
	ErrBOT = errors.New("media: beginning of tape")
	// ErrShortBuffer: the record is longer than the read buffer (st: ENOMEM);
	// the record is skipped, as st does.
	ErrShortBuffer = errors.New("media: record longer than the read buffer")
	// ErrEarlyWarning: the early-warning zone before the end of the medium
	// was reached by the previous write; this write did not happen (st:
	// ENOSPC). The next write, a trailer, is allowed.
	ErrEarlyWarning = errors.New("media: early warning, end of medium near (ENOSPC)")
	// ErrEndOfMedium: no more data fits (after the trailer write, or at the
	// physical end).
	ErrEndOfMedium = errors.New("media: end of medium")
	// ErrWriteProtected: the cartridge refuses writes (tab set, or a WORM
	// cartridge asked to overwrite what it holds).
	ErrWriteProtected = errors.New("media: write protected")
	// ErrNoMedium: no cartridge is loaded.
	ErrNoMedium = errors.New("media: no cartridge loaded")
	// ErrMedium: the drive could not read a record (st: EIO); the position
	// is past the bad record.
	ErrMedium = errors.New("media: medium error")
	// ErrNoDrive: the drive itself is not there (st: its device does not
	// exist), so that no cartridge can be mounted in it: callers stop
	// rather than try the next cartridge.
	ErrNoDrive = errors.New("media: no such drive")
	// ErrInUse: another process (or another operation of this one) has
	// the library open; one operation at a time drives a library.
	ErrInUse = errors.New("in use by another process")
)

// Drive is one tape drive with a cartridge possibly loaded. Positions are
// logical object numbers from the beginning of the tape, counting records
// and filemarks alike (SCSI READ POSITION, st's MTIOCPOS). One caller uses
// a drive at a time.
type Drive interface {
	// WriteRecord writes p as one record at the current position. Writing
	// anywhere but the end of data erases everything after it, as on tape.
	WriteRecord(p []byte) (int, error)
	// WriteFilemarks writes n filemarks; flush makes everything written so
	// far durable first (st's MTWEOF; without, MTWEOFI).
	WriteFilemarks(n int, flush bool) error
	// ReadRecord reads the next record into p.
	ReadRecord(p []byte) (int, error)
	// SpaceRecords moves over n records, forward if n > 0, backward if
	// n < 0, stopping at a filemark (ErrFilemark), at the end of data or the
	// beginning of the tape.
	SpaceRecords(n int) error
	// SpaceFilemarks moves over n filemarks: forward it ends just past the
	// n-th, backward just before it.
	SpaceFilemarks(n int) error
	// SeekEOD moves to the end of data, where the next write appends.
	SeekEOD() error
	// Rewind moves to the beginning of the tape.
	Rewind() error
	// Locate moves to a logical object number, as returned by Tell.
	Locate(pos int64) error
	// Tell returns the current logical object number.
	Tell() (int64, error)
	// Status describes the drive and its cartridge.
	Status() (DriveStatus, error)
	// AlertFlags returns the drive's TapeAlert flags.
	AlertFlags() (AlertFlags, error)
	// Stats returns the counters since the drive was opened.
	Stats() Stats
	// Close flushes and releases the drive; the cartridge stays loaded.
	Close() error
}

// DriveStatus is the drive's state (st's MTIOCGET).
type DriveStatus struct {
	Loaded         bool
	VolumeTag      string // the loaded cartridge's barcode, when known
	BOT, EOD       bool
	FileNo         int64 // tape files passed since the beginning
	BlockNo        int64 // records since the last filemark
	Position       int64 // logical object number
	WriteProtected bool
	WORM           bool
	EarlyWarning   bool  // past the early-warning point
	Capacity       int64 // bytes the cartridge holds, 0 if unknown
	Used           int64 // bytes recorded
}

// AlertFlags are the TapeAlert conditions a drive reports (a subset of the
// SCSI TapeAlert log page, the ones coffer acts on).
type AlertFlags struct {
	ReadWarning    bool // flag 1: recovered read errors
	WriteWarning   bool // flag 2
	HardError      bool // flag 3: an unrecovered read or write error
	Media          bool // flag 4: the cartridge is damaged
	WriteProtect   bool // flag 9
	CleaningNeeded bool // flag 20
}

// Stats count a drive's work since it was opened, like st's
// /sys/class/scsi_tape/stN/stats. Busy is the time the drive spent
// transferring and repositioning; for the VTL it is modelled from its
// configured rate, so that a benchmark's figures do not depend on the
// machine's load.
type Stats struct {
	RecordsWritten, RecordsRead int64
	BytesWritten, BytesRead     int64
	FilemarksWritten            int64
	Repositions                 int64 // moves that were not a sequential read or write
	ReadErrors, WriteErrors     int64
	Busy                        time.Duration
}
