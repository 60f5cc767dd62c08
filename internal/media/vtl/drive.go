package vtl

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/media"
)

// ErrCrashed: the drive stopped after an injected torn write; reopen the
// library to go on, as a restarted process would.
var ErrCrashed = errors.New("vtl: drive stopped by an injected crash")

// End-of-medium states, following st: the write that enters the
// early-warning zone succeeds; the next fails with ENOSPC; one trailer
// write is then allowed; after it the medium has ended.
const (
	ewNone = iota
	ewReached
	ewSignalled
	ewTrailerDone
)

// Drive is one drive of a library. It implements media.Drive.
type Drive struct {
	lib   *Library
	index int

	mu      sync.Mutex
	volume  string
	cart    *cartridge
	pos     int64
	ew      int
	crashed bool
	stats   media.Stats
	started time.Time // for the throttle: the drive's clock started here
}

var _ media.Drive = (*Drive)(nil)

// attach opens a cartridge in the drive (the changer loading it).
func (d *Drive) attach(volume string) error {
	c, err := openCartridge(d.lib.cartridgePath(volume))
	if err != nil {
		return fmt.Errorf("vtl: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.volume, d.cart, d.pos, d.crashed = volume, c, 0, false
	d.ew = ewNone
	if info := d.lib.st.Cartridges[volume]; info != nil && c.used >= info.Capacity-info.EarlyWarning {
		d.ew = ewReached
	}
	return nil
}

// detach closes the cartridge (the changer taking it out).
func (d *Drive) detach() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cart == nil {
		return nil
	}
	err := d.cart.sync()
	if cerr := d.cart.close(); err == nil {
		err = cerr
	}
	d.cart, d.volume = nil, ""
	return err
}

// info copies the loaded cartridge's description (the library's lock
// comes before the drive's).
func (d *Drive) info() CartridgeInfo {
	d.mu.Lock()
	v := d.volume
	d.mu.Unlock()
	info, _ := d.lib.Cartridge(v)
	return info
}

// ready is called with d.mu held.
func (d *Drive) ready() error {
	if d.crashed {
		return ErrCrashed
	}
	if d.cart == nil {
		return media.ErrNoMedium
	}
	return nil
}

// WriteRecord writes one record.
func (d *Drive) WriteRecord(p []byte) (int, error) {
	info := d.info()
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.writable(info); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, fmt.Errorf("vtl: a record has at least one byte")
	}
	if err := d.cutHere(info); err != nil {
		return 0, err
	}
	used := d.cart.used + int64(len(p))
	switch {
	case used > info.Capacity || d.lib.faults.endOfMedium(d.volume, used):
		d.stats.WriteErrors++
		return 0, media.ErrEndOfMedium
	case d.ew == ewReached:
		d.ew = ewSignalled
		return 0, media.ErrEarlyWarning
	case d.ew == ewTrailerDone:
		return 0, media.ErrEndOfMedium
	}
	if d.lib.faults.tear() {
		_ = d.cart.appendEntry(kindRecord, p, len(p)/2)
		d.crashed = true
		return 0, ErrCrashed
	}
	if err := d.cart.appendEntry(kindRecord, p, len(p)); err != nil {
		d.stats.WriteErrors++
		return 0, fmt.Errorf("vtl: %w", err)
	}
	d.pos++
	switch {
	case d.ew == ewSignalled:
		d.ew = ewTrailerDone
	case d.ew == ewNone && d.cart.used >= info.Capacity-info.EarlyWarning:
		d.ew = ewReached
	}
	d.stats.RecordsWritten++
	d.stats.BytesWritten += int64(len(p))
	d.transfer(int64(len(p)))
	return len(p), nil
}

// writable is called with d.mu held.
func (d *Drive) writable(info CartridgeInfo) error {
	if err := d.ready(); err != nil {
		return err
	}
	if info.WriteProtected {
		return media.ErrWriteProtected
	}
	if info.WORM && d.pos < int64(len(d.cart.entries)) {
		return fmt.Errorf("%w: a WORM cartridge only appends at the end of data", media.ErrWriteProtected)
	}
	return nil
}

// cutHere erases everything from the position on: a tape write does.
// At the end of data it also drops an incomplete entry header left by a
// crash.
func (d *Drive) cutHere(info CartridgeInfo) error {
	if err := d.cart.truncate(d.pos); err != nil {
		return fmt.Errorf("vtl: %w", err)
	}
	if d.cart.used < info.Capacity-info.EarlyWarning {
		d.ew = ewNone
	}
	return nil
}

// WriteFilemarks writes n filemarks.
func (d *Drive) WriteFilemarks(n int, flush bool) error {
	info := d.info()
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.writable(info); err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("vtl: %d filemarks", n)
	}
	if n > 0 {
		if err := d.cutHere(info); err != nil {
			return err
		}
	}
	for range n {
		if d.cart.used >= info.Capacity {
			return media.ErrEndOfMedium
		}
		if err := d.cart.appendEntry(kindFilemark, nil, 0); err != nil {
			return fmt.Errorf("vtl: %w", err)
		}
		d.pos++
		d.stats.FilemarksWritten++
	}
	if flush {
		if err := d.cart.sync(); err != nil {
			return fmt.Errorf("vtl: %w", err)
		}
	}
	return nil
}

// ReadRecord reads the next record.
func (d *Drive) ReadRecord(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.ready(); err != nil {
		return 0, err
	}
	if d.pos >= int64(len(d.cart.entries)) {
		return 0, media.ErrEOD
	}
	e := d.cart.entries[d.pos]
	at := d.pos
	d.pos++
	if e.kind == kindFilemark {
		return 0, media.ErrFilemark
	}
	d.transfer(int64(e.length))
	if int(e.length) > len(p) && e.kind != kindDamaged {
		return 0, fmt.Errorf("%w (%d bytes)", media.ErrShortBuffer, e.length)
	}
	if d.lib.faults.readError(d.volume, at) {
		d.stats.ReadErrors++
		return 0, fmt.Errorf("%w at position %d", media.ErrMedium, at)
	}
	n, err := d.cart.readPayload(at, p)
	if err != nil {
		d.stats.ReadErrors++
		return 0, fmt.Errorf("%w at position %d: %v", media.ErrMedium, at, err)
	}
	d.stats.RecordsRead++
	d.stats.BytesRead += int64(n)
	return n, nil
}

// Status describes the drive.
func (d *Drive) Status() (media.DriveStatus, error) {
	info := d.info()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.crashed {
		return media.DriveStatus{}, ErrCrashed
	}
	if d.cart == nil {
		return media.DriveStatus{}, nil
	}
	s := media.DriveStatus{Loaded: true, VolumeTag: d.volume, Position: d.pos, BOT: d.pos == 0,
		EOD: d.pos == int64(len(d.cart.entries)), WriteProtected: info.WriteProtected, WORM: info.WORM,
		EarlyWarning: d.ew != ewNone, Capacity: info.Capacity, Used: d.cart.used}
	for _, e := range d.cart.entries[:d.pos] {
		if e.kind == kindFilemark {
			s.FileNo++
			s.BlockNo = 0
		} else {
			s.BlockNo++
		}
	}
	return s, nil
}

// AlertFlags reports the TapeAlert conditions seen since the drive opened.
func (d *Drive) AlertFlags() (media.AlertFlags, error) {
	info := d.info()
	d.mu.Lock()
	defer d.mu.Unlock()
	return media.AlertFlags{HardError: d.stats.ReadErrors+d.stats.WriteErrors > 0,
		WriteProtect: d.cart != nil && info.WriteProtected}, nil
}

// Stats returns the drive's counters.
func (d *Drive) Stats() media.Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// Close flushes the cartridge; it stays loaded.
func (d *Drive) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cart == nil || d.crashed {
		return nil
	}
	return d.cart.sync()
}

// Name names the drive for messages.
func (d *Drive) Name() string { return fmt.Sprintf("drive%d", d.index) }
