package media

import "errors"

// ErrBusy: the changer's element or robot is busy; the operation did not
// happen and may be retried.
var ErrBusy = errors.New("media: changer busy")

// Changer is a tape library's robot, with mtx's model and numbering:
// drives (data transfer elements) count from 0, storage slots from 1, and
// import/export slots are storage elements numbered after the others.
type Changer interface {
	// Status is the inventory as `mtx status` reports it.
	Status() (*ChangerStatus, error)
	// Load moves the cartridge in slot into drive.
	Load(slot, drive int) error
	// Unload moves the cartridge in drive to slot (0: back where it came
	// from).
	Unload(slot, drive int) error
	// Transfer moves a cartridge from one slot to another.
	Transfer(from, to int) error
	// Inventory rescans the barcodes (mtx inventory).
	Inventory() error
}

// ChangerStatus is the state of every element of a changer.
type ChangerStatus struct {
	Drives []DriveElement `json:"drives"`
	Slots  []SlotElement  `json:"slots"` // storage and import/export slots, numbered from 1
}

// DriveElement is a data transfer element.
type DriveElement struct {
	Index      int    `json:"index"`
	Full       bool   `json:"full"`
	SourceSlot int    `json:"source_slot"` // the slot its cartridge came from, 0 if unknown
	VolumeTag  string `json:"volume_tag"`
}

// SlotElement is a storage element, or an import/export one.
type SlotElement struct {
	Number       int    `json:"number"`
	Full         bool   `json:"full"`
	ImportExport bool   `json:"import_export"`
	VolumeTag    string `json:"volume_tag"`
}

// FindVolume returns where a barcode is: in a drive (drive >= 0) or a slot
// (slot > 0); ok is false if the changer does not hold it.
func (s *ChangerStatus) FindVolume(tag string) (drive, slot int, ok bool) {
	for _, d := range s.Drives {
		if d.Full && d.VolumeTag == tag {
			return d.Index, 0, true
		}
	}
	for _, sl := range s.Slots {
		if sl.Full && sl.VolumeTag == tag {
			return -1, sl.Number, true
		}
	}
	return -1, 0, false
}
