package vtl

import (
	"fmt"

	"github.com/coffer-backup/coffer/internal/media"
)

var _ media.Changer = (*Library)(nil)

// StatusText is the library's inventory in `mtx status` form.
func (l *Library) StatusText() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := &media.ChangerStatus{}
	for i, d := range l.st.Drives {
		st.Drives = append(st.Drives, media.DriveElement{Index: i, Full: d.Volume != "", SourceSlot: d.Source, VolumeTag: d.Volume})
	}
	for i, v := range l.st.Slots {
		st.Slots = append(st.Slots, media.SlotElement{Number: i + 1, Full: v != "", VolumeTag: v,
			ImportExport: i >= l.st.Config.Slots})
	}
	return media.FormatMtxStatus(l.dir, st)
}

// Status reads the inventory back through the parser of a real `mtx
// status`, so the VTL exercises the code real changers depend on.
func (l *Library) Status() (*media.ChangerStatus, error) {
	if err := l.faults.changerOp(); err != nil {
		return nil, err
	}
	return media.ParseMtxStatus(l.StatusText())
}

// Load moves the cartridge in slot into drive.
func (l *Library) Load(slot, drive int) error {
	if err := l.faults.changerOp(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkSlot(slot); err != nil {
		return err
	}
	if drive < 0 || drive >= len(l.drives) {
		return fmt.Errorf("%w %d", errNoSuchDrive, drive)
	}
	v := l.st.Slots[slot-1]
	if v == "" {
		return fmt.Errorf("vtl: slot %d is empty", slot)
	}
	if cur := l.st.Drives[drive].Volume; cur != "" {
		return fmt.Errorf("vtl: drive %d holds %s", drive, cur)
	}
	if err := l.drives[drive].attach(v); err != nil {
		return err
	}
	l.st.Slots[slot-1] = ""
	l.st.Drives[drive] = driveState{Volume: v, Source: slot}
	l.st.Cartridges[v].Loads++
	return l.save()
}

// Unload moves the cartridge in drive to slot, or back to its source slot
// when slot is 0.
func (l *Library) Unload(slot, drive int) error {
	if err := l.faults.changerOp(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if drive < 0 || drive >= len(l.drives) {
		return fmt.Errorf("%w %d", errNoSuchDrive, drive)
	}
	ds := l.st.Drives[drive]
	if ds.Volume == "" {
		return fmt.Errorf("vtl: drive %d is empty", drive)
	}
	if slot == 0 {
		slot = ds.Source
	}
	if err := l.checkSlot(slot); err != nil {
		return err
	}
	if l.st.Slots[slot-1] != "" {
		return fmt.Errorf("vtl: slot %d holds %s", slot, l.st.Slots[slot-1])
	}
	if err := l.drives[drive].detach(); err != nil {
		return err
	}
	l.st.Slots[slot-1] = ds.Volume
	l.st.Drives[drive] = driveState{}
	return l.save()
}

// Transfer moves a cartridge between slots.
func (l *Library) Transfer(from, to int) error {
	if err := l.faults.changerOp(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkSlot(from); err != nil {
		return err
	}
	if err := l.checkSlot(to); err != nil {
		return err
	}
	if l.st.Slots[from-1] == "" {
		return fmt.Errorf("vtl: slot %d is empty", from)
	}
	if l.st.Slots[to-1] != "" {
		return fmt.Errorf("vtl: slot %d holds %s", to, l.st.Slots[to-1])
	}
	l.st.Slots[to-1], l.st.Slots[from-1] = l.st.Slots[from-1], ""
	return l.save()
}

// Inventory checks that every cartridge the library lists has its file.
func (l *Library) Inventory() error {
	if err := l.faults.changerOp(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for v := range l.st.Cartridges {
		if _, err := statFile(l.cartridgePath(v)); err != nil {
			return fmt.Errorf("vtl: cartridge %s: %w", v, err)
		}
	}
	return nil
}
