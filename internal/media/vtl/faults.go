package vtl

import (
	"fmt"
	"os"
	"sync"

	"github.com/coffer-backup/coffer/internal/media"
)

// Faults injects the failures real libraries have, so tests can show that
// coffer reports them and loses nothing. Zero values inject nothing.
type Faults struct {
	mu sync.Mutex
	// busy changer operations left to refuse with media.ErrBusy.
	busy int
	// readErrorAt makes reading the record at this position of this
	// cartridge fail with media.ErrMedium.
	readErrorAt map[string]int64
	// eomAt makes the medium end (without early warning) once this many
	// bytes are recorded on this cartridge.
	eomAt map[string]int64
	// tornAfter: after this many more records, one write reaches the file
	// half written and the drive stops, as if the process were killed.
	tornAfter int
	tornArmed bool
}

// Faults returns the library's fault injector.
func (l *Library) Faults() *Faults { return &l.faults }

// ChangerBusy makes the next n changer operations fail with media.ErrBusy.
func (f *Faults) ChangerBusy(n int) { f.mu.Lock(); f.busy = n; f.mu.Unlock() }

// ReadErrorAt makes the record at pos of a cartridge unreadable.
func (f *Faults) ReadErrorAt(barcode string, pos int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readErrorAt == nil {
		f.readErrorAt = map[string]int64{}
	}
	f.readErrorAt[barcode] = pos
}

// EndOfMediumAt makes a cartridge end early, without early warning.
func (f *Faults) EndOfMediumAt(barcode string, bytes int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.eomAt == nil {
		f.eomAt = map[string]int64{}
	}
	f.eomAt[barcode] = bytes
}

// TornWriteAfter lets n more records be written whole; the next one is
// written halfway and the drive fails every operation after it with
// ErrCrashed, like a process killed in the middle of a write.
func (f *Faults) TornWriteAfter(n int) {
	f.mu.Lock()
	f.tornAfter, f.tornArmed = n, true
	f.mu.Unlock()
}

func (f *Faults) changerOp() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.busy > 0 {
		f.busy--
		return media.ErrBusy
	}
	return nil
}

func (f *Faults) readError(barcode string, pos int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.readErrorAt[barcode]
	return ok && p == pos
}

func (f *Faults) endOfMedium(barcode string, used int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.eomAt[barcode]
	return ok && used >= b
}

// tear reports whether this record write is the one to tear.
func (f *Faults) tear() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.tornArmed {
		return false
	}
	if f.tornAfter > 0 {
		f.tornAfter--
		return false
	}
	f.tornArmed = false
	return true
}

func statFile(p string) (os.FileInfo, error) { return os.Stat(p) }

// DamageRecord flips a byte in the middle of the record at pos of a
// cartridge in its file, as bit rot would: it stays damaged across
// reopens. The cartridge must not be loaded.
func (l *Library) DamageRecord(barcode string, pos int64) error {
	c, err := openCartridge(l.cartridgePath(barcode))
	if err != nil {
		return err
	}
	defer func() { _ = c.close() }() // on an error; the end closes it checked
	if pos < 0 || pos >= int64(len(c.entries)) || c.entries[pos].kind != kindRecord || c.entries[pos].length == 0 {
		return fmt.Errorf("vtl: %s has no record at %d", barcode, pos)
	}
	e := c.entries[pos]
	at := e.off + entryHeaderSize + int64(e.length)/2
	b := make([]byte, 1)
	if _, err := c.f.ReadAt(b, at); err != nil {
		return err
	}
	b[0] ^= 0xff
	if _, err := c.f.WriteAt(b, at); err != nil {
		return err
	}
	return c.close()
}
