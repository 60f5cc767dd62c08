package service

import (
	"time"

	"github.com/coffer-backup/coffer/internal/media"
	"github.com/coffer-backup/coffer/internal/media/vtl"
)

// VTLCreateInput describes a new virtual tape library.
type VTLCreateInput struct {
	Dir                         string
	Drives, Slots, ImportExport int
	Capacity                    int64 // bytes per cartridge
	Rate                        int64 // bytes per second of a drive (0: not modelled)
	RepositionTime              time.Duration
	Throttle                    bool
}

// CreateVTL makes a virtual tape library directory.
func (s *Service) CreateVTL(in VTLCreateInput) error {
	if in.Dir == "" {
		return invalidf("no directory given")
	}
	err := vtl.Create(in.Dir, vtl.Config{Drives: in.Drives, Slots: in.Slots, ImportExport: in.ImportExport, Capacity: in.Capacity,
		Rate: in.Rate, RepositionTime: in.RepositionTime, Throttle: in.Throttle})
	if err != nil {
		return invalidf("%v", err)
	}
	return nil
}

// AddVTLCartridge puts a new blank cartridge into a slot of a virtual
// tape library.
func (s *Service) AddVTLCartridge(dir, barcode string, slot int, worm bool, capacity int64) error {
	l, err := vtl.Open(dir)
	if err != nil {
		return err
	}
	defer l.Close()
	if err := l.AddCartridge(barcode, slot, vtl.CartridgeInfo{WORM: worm, Capacity: capacity}); err != nil {
		return invalidf("%v", err)
	}
	return nil
}

// MediaLibraryStatus is a library's inventory, as `mtx status` reports it.
func (s *Service) MediaLibraryStatus(in MediaLibraryInput) (*media.ChangerStatus, error) {
	lib, closeLib, err := openLibrary(in)
	if err != nil {
		return nil, err
	}
	defer closeLib()
	return lib.Changer.Status()
}
