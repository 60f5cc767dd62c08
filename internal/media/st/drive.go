// Package st drives a real tape drive through the Linux st driver
// (/dev/nst*, the non-rewinding device) and a real changer through mtx.
// Both implement the media interfaces and are meant to pass the
// conformance suite run by hand (docs/09-tape.md); no tape hardware is
// available where coffer's CI runs, so there the changer runs against a
// stand-in mtx (testutil.FakeMtx) and the drive is built and vetted but
// not exercised beyond a missing device.
package st

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/media"
)

// ioctl numbers and operations of <linux/mtio.h> (64-bit Linux).
const (
	mtiocTop = 0x40086d01 // _IOW('m', 1, struct mtop)
	mtiocGet = 0x80306d02 // _IOR('m', 2, struct mtget)
	mtiocPos = 0x80086d03 // _IOR('m', 3, struct mtpos)

	mtFSF    = 1
	mtBSF    = 2
	mtFSR    = 3
	mtBSR    = 4
	mtWEOF   = 5
	mtREW    = 6
	mtOFFL   = 7
	mtEOM    = 12
	mtSETBLK = 20
	mtSEEK   = 22
	mtWEOFI  = 35

	gmtEOF    = 0x80000000
	gmtBOT    = 0x40000000
	gmtEOT    = 0x20000000
	gmtEOD    = 0x08000000
	gmtWrProt = 0x04000000
	gmtOnline = 0x01000000
)

type mtop struct {
	op    int16
	_     int16
	count int32
}

type mtget struct {
	typ, resid, dsreg, gstat, erreg int64
	fileno, blkno                   int32
}

// Drive is a tape drive opened through st. The device is opened when an
// operation needs it and closed by Eject: st only opens a drive holding a
// cartridge, and notices a new one at open.
type Drive struct {
	mu       sync.Mutex
	device   string
	f        *os.File
	lastZero bool // the previous read returned zero bytes (a filemark)
	stats    media.Stats
}

var _ media.Drive = (*Drive)(nil)

// Open prepares a non-rewinding st device (/dev/nstN); it is opened, in
// variable-block mode, at its first operation.
func Open(device string) *Drive { return &Drive{device: device} }

// open is called with d.mu held.
func (d *Drive) open() error {
	if d.f != nil {
		return nil
	}
	f, err := os.OpenFile(d.device, os.O_RDWR, 0)
	if errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EACCES) {
		f, err = os.OpenFile(d.device, os.O_RDONLY, 0)
	}
	if err != nil {
		if errors.Is(err, syscall.ENOMEDIUM) || errors.Is(err, syscall.EIO) {
			return fmt.Errorf("%w in %s", media.ErrNoMedium, d.device)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: the drive's device %s does not exist: is the drive attached and the st driver loaded "+
				"(`lsscsi -g` lists tape drives as /dev/stN; coffer writes to the non-rewinding /dev/nstN)? (%w)", media.ErrNoDrive, d.device, err)
		}
		return err
	}
	d.f = f
	if err := d.op(mtSETBLK, 0); err != nil {
		_ = f.Close() // nothing written yet
		d.f = nil
		return fmt.Errorf("st: %s: variable-block mode: %w", d.device, err)
	}
	return nil
}

// Eject takes the drive offline (MTOFFL: rewind and unload, which most
// changers need before they move the cartridge) and closes the device.
// The device is opened for it if this process has not opened it yet: the
// cartridge may have been loaded by another operation, which ended
// without ejecting it. A drive without a cartridge has nothing to eject.
func (d *Drive) Eject() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.open(); errors.Is(err, media.ErrNoMedium) {
		return nil
	} else if err != nil {
		return err
	}
	err := d.op(mtOFFL, 0)
	if cerr := d.f.Close(); err == nil {
		err = cerr
	}
	d.f = nil
	return err
}

// op runs an MTIOCTOP; the device must be open.
func (d *Drive) op(op int16, count int32) error {
	m := mtop{op: op, count: count}
	_, _, e := unix.Syscall(unix.SYS_IOCTL, d.f.Fd(), mtiocTop, uintptr(unsafe.Pointer(&m)))
	if e != 0 {
		return mapErrno(e)
	}
	return nil
}

func (d *Drive) get() (mtget, error) {
	var g mtget
	_, _, e := unix.Syscall(unix.SYS_IOCTL, d.f.Fd(), mtiocGet, uintptr(unsafe.Pointer(&g)))
	if e != 0 {
		return g, mapErrno(e)
	}
	return g, nil
}

func mapErrno(e syscall.Errno) error {
	switch e {
	case syscall.ENOSPC:
		return media.ErrEarlyWarning
	case syscall.ENOMEM:
		return media.ErrShortBuffer
	case syscall.EROFS, syscall.EACCES:
		return media.ErrWriteProtected
	case syscall.ENOMEDIUM:
		return media.ErrNoMedium
	case syscall.EIO:
		return fmt.Errorf("%w (EIO)", media.ErrMedium)
	}
	return e
}

// WriteRecord writes one record (one write(2) in variable-block mode).
// After ENOSPC st allows one more write; a failure after it is the end of
// the medium.
func (d *Drive) WriteRecord(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.open(); err != nil {
		return 0, err
	}
	d.lastZero = false
	n, err := d.f.Write(p)
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			g, gerr := d.get()
			if gerr == nil && g.gstat&gmtEOT != 0 && n == 0 && d.stats.WriteErrors > 0 {
				return 0, media.ErrEndOfMedium
			}
			d.stats.WriteErrors++
			return n, media.ErrEarlyWarning
		}
		return n, mapPathErr(err)
	}
	d.stats.RecordsWritten++
	d.stats.BytesWritten += int64(n)
	return n, nil
}

func mapPathErr(err error) error {
	var e syscall.Errno
	if errors.As(err, &e) {
		return mapErrno(e)
	}
	return err
}

// WriteFilemarks writes n filemarks (MTWEOF, or MTWEOFI without flush).
func (d *Drive) WriteFilemarks(n int, flush bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.open(); err != nil {
		return err
	}
	op := int16(mtWEOFI)
	if flush {
		op = mtWEOF
	}
	if err := d.op(op, int32(n)); err != nil {
		return err
	}
	d.stats.FilemarksWritten += int64(n)
	return nil
}

// ReadRecord reads one record; a zero-byte read is a filemark, and a
// second one in a row is the end of data.
func (d *Drive) ReadRecord(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.open(); err != nil {
		return 0, err
	}
	n, err := d.f.Read(p)
	if err != nil && n == 0 {
		if errors.Is(err, syscall.ENOMEM) {
			return 0, media.ErrShortBuffer
		}
		if errors.Is(err, syscall.EIO) {
			if g, gerr := d.get(); gerr == nil && g.gstat&gmtEOD != 0 {
				return 0, media.ErrEOD
			}
			d.stats.ReadErrors++
		}
		if !errors.Is(err, io.EOF) {
			return 0, mapPathErr(err)
		}
	}
	if n == 0 {
		if d.lastZero {
			return 0, media.ErrEOD
		}
		d.lastZero = true
		return 0, media.ErrFilemark
	}
	d.lastZero = false
	d.stats.RecordsRead++
	d.stats.BytesRead += int64(n)
	return n, nil
}

// SpaceRecords moves over records (MTFSR / MTBSR).
func (d *Drive) SpaceRecords(n int) error { return d.space(n, mtFSR, mtBSR) }

// SpaceFilemarks moves over filemarks (MTFSF / MTBSF).
func (d *Drive) SpaceFilemarks(n int) error { return d.space(n, mtFSF, mtBSF) }

func (d *Drive) space(n int, fwd, back int16) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.open(); err != nil {
		return err
	}
	d.lastZero = false
	if n == 0 {
		return nil
	}
	d.stats.Repositions++
	op, c := fwd, n
	if n < 0 {
		op, c = back, -n
	}
	err := d.op(op, int32(c))
	if err == nil {
		return nil
	}
	g, gerr := d.get()
	switch {
	case gerr != nil:
		return err
	case g.gstat&gmtBOT != 0 && n < 0:
		return media.ErrBOT
	case g.gstat&gmtEOD != 0:
		return media.ErrEOD
	case g.gstat&gmtEOF != 0:
		return media.ErrFilemark
	}
	return err
}

// SeekEOD moves to the end of data (MTEOM).
func (d *Drive) SeekEOD() error { return d.simple(mtEOM, 0) }

// Rewind rewinds (MTREW).
func (d *Drive) Rewind() error { return d.simple(mtREW, 0) }

// Locate moves to a logical block (MTSEEK).
func (d *Drive) Locate(pos int64) error { return d.simple(mtSEEK, int32(pos)) }

func (d *Drive) simple(op int16, c int32) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.open(); err != nil {
		return err
	}
	d.lastZero = false
	d.stats.Repositions++
	return d.op(op, c)
}

// Tell returns the logical block number (MTIOCPOS).
func (d *Drive) Tell() (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.open(); err != nil {
		return 0, err
	}
	var pos int64
	_, _, e := unix.Syscall(unix.SYS_IOCTL, d.f.Fd(), mtiocPos, uintptr(unsafe.Pointer(&pos)))
	if e != 0 {
		return 0, mapErrno(e)
	}
	return pos, nil
}

// Status reads MTIOCGET.
func (d *Drive) Status() (media.DriveStatus, error) {
	d.mu.Lock()
	err := d.open()
	var g mtget
	if err == nil {
		g, err = d.get()
	}
	d.mu.Unlock()
	if errors.Is(err, media.ErrNoMedium) {
		return media.DriveStatus{}, nil
	}
	if err != nil {
		return media.DriveStatus{}, err
	}
	s := media.DriveStatus{Loaded: g.gstat&gmtOnline != 0, BOT: g.gstat&gmtBOT != 0, EOD: g.gstat&gmtEOD != 0,
		FileNo: int64(g.fileno), BlockNo: int64(g.blkno), WriteProtected: g.gstat&gmtWrProt != 0,
		EarlyWarning: g.gstat&gmtEOT != 0}
	if p, err := d.Tell(); err == nil {
		s.Position = p
	}
	return s, nil
}

// AlertFlags: reading the TapeAlert log page needs SCSI generic access
// (sg), which this drive does not open; it reports the write protection
// st knows.
func (d *Drive) AlertFlags() (media.AlertFlags, error) {
	s, err := d.Status()
	return media.AlertFlags{WriteProtect: s.WriteProtected, HardError: d.Stats().ReadErrors > 0}, err
}

// Stats returns the counters kept by this process.
func (d *Drive) Stats() media.Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// Close closes the device; st writes a filemark if the last operation was
// a write.
func (d *Drive) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f == nil {
		return nil
	}
	err := d.f.Close()
	d.f = nil
	return err
}
