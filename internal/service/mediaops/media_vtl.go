package mediaops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"context"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/media/volume"
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
func (s Ops) CreateVTL(in VTLCreateInput) error {
	if in.Dir == "" {
		return service.Invalidf("no directory given")
	}
	err := vtl.Create(in.Dir, vtl.Config{Drives: in.Drives, Slots: in.Slots, ImportExport: in.ImportExport, Capacity: in.Capacity,
		Rate: in.Rate, RepositionTime: in.RepositionTime, Throttle: in.Throttle})
	if err != nil {
		return service.Invalidf("%v", err)
	}
	return nil
}

// AddVTLCartridge puts a new blank cartridge into a slot of a virtual
// tape library.
func (s Ops) AddVTLCartridge(dir, barcode string, slot int, worm bool, capacity int64) error {
	l, err := vtl.Open(dir)
	if err != nil {
		return err
	}
	defer s.warnClose("the virtual tape library", l.Close)
	if err := l.AddCartridge(barcode, slot, vtl.CartridgeInfo{WORM: worm, Capacity: capacity}); err != nil {
		return service.Invalidf("%v", err)
	}
	return nil
}

// MediaLibraryStatus is a library's inventory, as `mtx status` reports
// it: its drives and slots and the cartridges in them.
func (s Ops) MediaLibraryStatus(ctx context.Context, in *api.LibraryParam, here MediaHere) (*api.MediaLibraryStatus, error) {
	return s.mediaLibraryStatus(ctx, in, here, nil)
}

func (s Ops) mediaLibraryStatus(ctx context.Context, in *api.LibraryParam, here MediaHere, handed mediaBook) (*api.MediaLibraryStatus, error) {
	at, err := s.locate(ctx, here.library(in.Library, here.Drive), handed)
	if err != nil {
		return nil, err
	}
	if at.worker != "" {
		res, _, err := handOff[*api.MediaLibraryStatus](ctx, s, at, "media-library-status", in, nil)
		return res, err
	}
	lib, closeLib, err := at.ml.Open()
	if err != nil {
		return nil, err
	}
	defer s.closeLibrary(closeLib)
	return libraryStatus(lib, at.ml)
}

// libraryStatus is an open library's status document.
func libraryStatus(lib *volume.Library, ml mediaLibrary) (*api.MediaLibraryStatus, error) {
	st, err := lib.Changer.Status()
	if err != nil {
		return nil, err
	}
	out := &api.MediaLibraryStatus{Library: ml.Ref(), Kind: ml.Kind(), Drives: []api.MediaDrive{}, Slots: []api.MediaSlot{}}
	for _, d := range st.Drives {
		out.Drives = append(out.Drives, api.MediaDrive{Index: d.Index, Full: d.Full, Barcode: d.VolumeTag, SourceSlot: d.SourceSlot,
			WORM: d.Full && cartridgeWORM(lib, d.VolumeTag)})
	}
	for _, sl := range st.Slots {
		out.Slots = append(out.Slots, api.MediaSlot{Number: sl.Number, ImportExport: sl.ImportExport, Full: sl.Full, Barcode: sl.VolumeTag,
			WORM: sl.Full && cartridgeWORM(lib, sl.VolumeTag)})
	}
	return out, nil
}
