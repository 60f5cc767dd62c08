// Package vtl is a file-backed virtual tape library: a directory per
// library, a file per cartridge, drives with st's semantics and a changer
// with mtx's. Tests use it as the real component behind coffer's media
// code, and a site can use it to keep tape semantics (append-only volumes,
// WORM, media pools) on disk.
//
// Layout of a library directory:
//
//	library.json        configuration, elements and cartridges (rewritten atomically)
//	<barcode>.tape      one cartridge (cartridge.go)
//	.lock               held by the process that has the library open
package vtl

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"time"

	"github.com/coffer-backup/coffer/internal/media"
)

// Config describes a library when it is created.
type Config struct {
	Drives       int `json:"drives"`
	Slots        int `json:"slots"`         // storage slots
	ImportExport int `json:"import_export"` // import/export slots, numbered after the storage slots
	// Capacity of a new cartridge in bytes, and the size of its
	// early-warning zone (default: 1/32 of the capacity, at least 2 MiB or
	// a quarter of it).
	Capacity     int64 `json:"capacity"`
	EarlyWarning int64 `json:"early_warning,omitempty"`
	// Rate is the drive's streaming rate in bytes per second (0: not
	// modelled). Every move that is not the next sequential record costs
	// RepositionTime plus the distance at LocateRate (default 10 × Rate).
	Rate           int64         `json:"rate,omitempty"`
	RepositionTime time.Duration `json:"reposition_time,omitempty"`
	LocateRate     int64         `json:"locate_rate,omitempty"`
	// Throttle makes the drives take the modelled time for real (for
	// benchmarks); without it the time is only counted in Stats.Busy.
	Throttle bool `json:"throttle,omitempty"`
}

// CartridgeInfo is what the library knows of one cartridge.
type CartridgeInfo struct {
	Capacity       int64 `json:"capacity"`
	EarlyWarning   int64 `json:"early_warning"`
	WORM           bool  `json:"worm,omitempty"`
	WriteProtected bool  `json:"write_protected,omitempty"`
	Loads          int64 `json:"loads"`
}

type state struct {
	Version    int                       `json:"version"`
	Config     Config                    `json:"config"`
	Slots      []string                  `json:"slots"`  // barcode per slot (index 0 is slot 1), "" empty
	Drives     []driveState              `json:"drives"` // what each drive holds
	Cartridges map[string]*CartridgeInfo `json:"cartridges"`
}

type driveState struct {
	Volume string `json:"volume,omitempty"`
	Source int    `json:"source,omitempty"`
}

// Library is an open virtual tape library. It implements media.Changer.
type Library struct {
	dir    string
	lock   *os.File
	mu     sync.Mutex
	st     state
	drives []*Drive
	faults Faults
}

// ErrInUse: another process (or another operation of this one) has the
// library open.
var ErrInUse = media.ErrInUse

var barcodeRE = regexp.MustCompile(`^[A-Z0-9]{1,16}$`)

// Create makes a new library directory.
func Create(dir string, cfg Config) error {
	if cfg.Drives < 1 || cfg.Slots < 1 || cfg.ImportExport < 0 || cfg.Capacity <= 0 {
		return fmt.Errorf("vtl: a library needs at least one drive and one slot, and a capacity")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "library.json")); err == nil {
		return fmt.Errorf("vtl: %s already holds a library", dir)
	}
	st := state{Version: 1, Config: cfg, Slots: make([]string, cfg.Slots+cfg.ImportExport),
		Drives: make([]driveState, cfg.Drives), Cartridges: map[string]*CartridgeInfo{}}
	return writeState(dir, &st)
}

// Open opens a library; one process at a time holds it.
func Open(dir string) (*Library, error) {
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("vtl: library %s is %w", dir, ErrInUse)
	}
	l := &Library{dir: dir, lock: lock}
	b, err := os.ReadFile(filepath.Join(dir, "library.json"))
	if err == nil {
		err = json.Unmarshal(b, &l.st)
	}
	if err == nil && (l.st.Version != 1 || len(l.st.Drives) != l.st.Config.Drives) {
		err = fmt.Errorf("unknown version %d or inconsistent drives", l.st.Version)
	}
	if err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("vtl: library %s: %w", dir, err)
	}
	for i := range l.st.Drives {
		d := &Drive{lib: l, index: i}
		if v := l.st.Drives[i].Volume; v != "" {
			if err := d.attach(v); err != nil {
				_ = l.Close() // best effort after the error returned
				return nil, err
			}
		}
		l.drives = append(l.drives, d)
	}
	return l, nil
}

// Close closes the drives' cartridges and releases the library.
func (l *Library) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first error
	for _, d := range l.drives {
		if err := d.detach(); err != nil && first == nil {
			first = err
		}
	}
	if err := l.lock.Close(); err != nil && first == nil {
		first = err
	}
	return first
}

// Dir is the library's directory.
func (l *Library) Dir() string { return l.dir }

// Config is the library's configuration.
func (l *Library) Config() Config { return l.st.Config }

// Drive returns drive i (from 0).
func (l *Library) Drive(i int) (*Drive, error) {
	if i < 0 || i >= len(l.drives) {
		return nil, fmt.Errorf("vtl: no drive %d (the library has %d)", i, len(l.drives))
	}
	return l.drives[i], nil
}

// AddCartridge puts a new blank cartridge into an empty slot (an operator
// inserting one). Capacity 0 takes the library's.
func (l *Library) AddCartridge(barcode string, slot int, info CartridgeInfo) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !barcodeRE.MatchString(barcode) {
		return fmt.Errorf("vtl: barcode %q: use 1 to 16 capital letters and digits", barcode)
	}
	if _, ok := l.st.Cartridges[barcode]; ok {
		return fmt.Errorf("vtl: cartridge %s exists", barcode)
	}
	if err := l.checkSlot(slot); err != nil {
		return err
	}
	if l.st.Slots[slot-1] != "" {
		return fmt.Errorf("vtl: slot %d holds %s", slot, l.st.Slots[slot-1])
	}
	if info.Capacity == 0 {
		info.Capacity = l.st.Config.Capacity
	}
	if info.EarlyWarning == 0 {
		info.EarlyWarning = l.st.Config.EarlyWarning
	}
	if info.EarlyWarning == 0 {
		// Room after the early warning for a few large blocks (the
		// trailer st allows), even on the small cartridges of tests.
		info.EarlyWarning = max(info.Capacity/32, min(info.Capacity/4, 2<<20))
	}
	f, err := os.OpenFile(l.cartridgePath(barcode), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("vtl: cartridge %s: %w", barcode, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("vtl: cartridge %s: %w", barcode, err)
	}
	l.st.Cartridges[barcode] = &info
	l.st.Slots[slot-1] = barcode
	return l.save()
}

// SetWriteProtected sets or clears a cartridge's write-protect tab.
func (l *Library) SetWriteProtected(barcode string, on bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.st.Cartridges[barcode]
	if !ok {
		return fmt.Errorf("vtl: no cartridge %s", barcode)
	}
	c.WriteProtected = on
	return l.save()
}

// Cartridge describes one cartridge.
func (l *Library) Cartridge(barcode string) (CartridgeInfo, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.st.Cartridges[barcode]
	if !ok {
		return CartridgeInfo{}, false
	}
	return *c, true
}

func (l *Library) cartridgePath(barcode string) string {
	return filepath.Join(l.dir, barcode+".tape")
}

func (l *Library) checkSlot(slot int) error {
	if slot < 1 || slot > len(l.st.Slots) {
		return fmt.Errorf("vtl: no slot %d (the library has %d)", slot, len(l.st.Slots))
	}
	return nil
}

func (l *Library) save() error { return writeState(l.dir, &l.st) }

// writeState replaces library.json atomically, so a crash leaves the old
// or the new inventory, never half of one.
func writeState(dir string, st *state) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "library.json.tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close() // the write's error is returned
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close() // the sync's error is returned
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "library.json"))
}

var errNoSuchDrive = errors.New("vtl: no such drive")

// SetThrottle turns the drives' real-time pacing on or off for this
// process (the library's file keeps its setting): a benchmark paces the
// copies it times and only models the time of the restores it compares.
func (l *Library) SetThrottle(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.st.Config.Throttle = on
}
