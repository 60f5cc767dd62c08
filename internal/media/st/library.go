package st

import (
	"fmt"

	"github.com/coffer-backup/coffer/internal/media"
)

// Library joins an mtx changer and its st drives, so that a cartridge is
// ejected from its drive before the robot takes it, and the drive device
// is reopened for the next cartridge.
type Library struct {
	*Changer
	// Drives maps mtx's data transfer element numbers to st devices.
	Drives map[int]*Drive
}

// Unload ejects the drive, then has the changer move the cartridge.
func (l *Library) Unload(slot, drive int) error {
	d, ok := l.Drives[drive]
	if !ok {
		return fmt.Errorf("st: no device configured for drive %d", drive)
	}
	if err := d.Eject(); err != nil {
		return fmt.Errorf("st: eject drive %d: %w", drive, err)
	}
	return l.Changer.Unload(slot, drive)
}

var _ media.Changer = (*Library)(nil)
