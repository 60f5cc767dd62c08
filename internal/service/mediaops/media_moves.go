package mediaops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"context"
	"slices"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/media"
	"github.com/coffer-backup/coffer/internal/media/volume"
)

// MediaLoad puts a cartridge, by its barcode, into the library's drive,
// as an operator does with mtx load before mt or a restore by hand: the
// drive is unloaded first if it holds another, and a cartridge another
// drive holds goes back to its slot first. It returns the library's
// status after the move.
func (s Ops) MediaLoad(ctx context.Context, in *api.MediaLoadInput, here MediaHere) (*api.MediaLibraryStatus, error) {
	return s.mediaLoad(ctx, in, here, nil)
}

func (s Ops) mediaLoad(ctx context.Context, in *api.MediaLoadInput, here MediaHere, handed mediaBook) (*api.MediaLibraryStatus, error) {
	barcode := in.Body.Barcode
	if barcode == "" {
		return nil, service.Invalidf("no cartridge given: name its barcode (coffer media vtl status lists the library's)")
	}
	lib, ml, closeLib, at, err := s.openAt(ctx, here.library(in.Library, in.Drive), handed)
	if err != nil || at.worker != "" {
		return handOffStatus(ctx, s, at, "media-load", in, err)
	}
	defer s.closeLibrary(closeLib)
	st, err := lib.Changer.Status()
	if err != nil {
		return nil, err
	}
	if _, _, ok := st.FindVolume(barcode); !ok {
		return nil, api.Errorf(api.NotFound, "media library %s holds no cartridge %s (coffer media vtl status lists its cartridges)", ml.Ref(), barcode)
	}
	if err := lib.Load(barcode); err != nil {
		return nil, err
	}
	return libraryStatus(lib, ml)
}

// MediaUnload returns the cartridge in the library's drive to the slot
// it came from (a real drive is ejected first), and returns the
// library's status after the move.
func (s Ops) MediaUnload(ctx context.Context, in *api.DriveParam, here MediaHere) (*api.MediaLibraryStatus, error) {
	return s.mediaUnload(ctx, in, here, nil)
}

func (s Ops) mediaUnload(ctx context.Context, in *api.DriveParam, here MediaHere, handed mediaBook) (*api.MediaLibraryStatus, error) {
	lib, ml, closeLib, at, err := s.openAt(ctx, here.library(in.Library, in.Drive), handed)
	if err != nil || at.worker != "" {
		return handOffStatus(ctx, s, at, "media-unload", in, err)
	}
	defer s.closeLibrary(closeLib)
	st, err := lib.Changer.Status()
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(st.Drives, func(d media.DriveElement) bool { return d.Index == lib.DriveIndex })
	switch {
	case i < 0:
		return nil, service.Invalidf("media library %s: the changer has no drive %d", ml.Ref(), lib.DriveIndex)
	case !st.Drives[i].Full:
		return nil, service.Invalidf("drive %d of media library %s holds no cartridge: nothing to unload", lib.DriveIndex, ml.Ref())
	}
	if err := lib.Changer.Unload(0, lib.DriveIndex); err != nil {
		return nil, err
	}
	return libraryStatus(lib, ml)
}

// openAt opens the library an operation names, unless it is handed to
// the library's worker (at.worker).
func (s Ops) openAt(ctx context.Context, in MediaLibraryInput, handed mediaBook) (*volume.Library, mediaLibrary, func() error, libraryAt, error) {
	at, err := s.locate(ctx, in, handed)
	if err != nil || at.worker != "" {
		return nil, at.ml, nil, at, err
	}
	lib, closeLib, err := at.ml.Open()
	return lib, at.ml, closeLib, at, err
}

// handOffStatus is a move's failure to open its library (err), or the
// move run on the library's worker.
func handOffStatus(ctx context.Context, s Ops, at libraryAt, id string, call any, err error) (*api.MediaLibraryStatus, error) {
	if err != nil {
		return nil, err
	}
	res, _, err := handOff[*api.MediaLibraryStatus](ctx, s, at, id, call, nil)
	return res, err
}
