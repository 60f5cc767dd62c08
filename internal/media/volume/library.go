package volume

import (
	"context"
	"fmt"
	"slices"

	"github.com/coffer-backup/coffer/internal/media"
)

// Library is a changer and the drive coffer uses in it.
type Library struct {
	Changer    media.Changer
	Drive      media.Drive
	DriveIndex int
}

// Load puts the cartridge with this barcode into the drive (unloading
// whatever is there). A cartridge another drive holds goes back to its
// slot first: an earlier copy through several drives left it there, and
// a drive of a copy running now never has it asked for (its cartridges
// are claimed, Pool.Claims).
func (l *Library) Load(barcode string) error {
	st, err := l.Changer.Status()
	if err != nil {
		return err
	}
	drive, slot, ok := st.FindVolume(barcode)
	switch {
	case !ok:
		return fmt.Errorf("the library holds no cartridge %s", barcode)
	case drive == l.DriveIndex:
		return nil
	case drive >= 0:
		if err := l.Changer.Unload(0, drive); err != nil {
			return fmt.Errorf("cartridge %s is in drive %d, which does not give it back: %w", barcode, drive, err)
		}
		if st, err = l.Changer.Status(); err != nil {
			return err
		}
		if _, slot, ok = st.FindVolume(barcode); !ok || slot == 0 {
			return fmt.Errorf("cartridge %s left drive %d for no slot", barcode, drive)
		}
	}
	// The changer's drives by their numbers, not their places in the
	// status: a real library's configuration may name any of them.
	i := slices.IndexFunc(st.Drives, func(d media.DriveElement) bool { return d.Index == l.DriveIndex })
	if i < 0 {
		return fmt.Errorf("the changer has no drive %d (its status lists %d drive(s)): check the library's drive numbers", l.DriveIndex, len(st.Drives))
	}
	if st.Drives[i].Full {
		if err := l.Changer.Unload(0, l.DriveIndex); err != nil {
			return err
		}
	}
	return l.Changer.Load(slot, l.DriveIndex)
}

// Mount loads a cartridge and mounts its volume.
func (l *Library) Mount(_ context.Context, barcode string) (*Volume, error) {
	if err := l.Load(barcode); err != nil {
		return nil, err
	}
	v, err := Mount(l.Drive)
	if err != nil {
		return nil, err
	}
	if v.Label.Barcode != barcode {
		return nil, fmt.Errorf("cartridge %s carries the label of %s", barcode, v.Label.Barcode)
	}
	return v, nil
}

// Barcodes lists the cartridges in the library's storage slots and drives.
func (l *Library) Barcodes() ([]string, error) {
	st, err := l.Changer.Status()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range st.Drives {
		if d.Full && d.VolumeTag != "" {
			out = append(out, d.VolumeTag)
		}
	}
	for _, s := range st.Slots {
		if s.Full && !s.ImportExport && s.VolumeTag != "" {
			out = append(out, s.VolumeTag)
		}
	}
	return out, nil
}
