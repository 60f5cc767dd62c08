package mediaops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/config"
	mediaall "github.com/coffer-backup/coffer/internal/media/all"
	"github.com/coffer-backup/coffer/internal/media/format"
	"github.com/coffer-backup/coffer/internal/media/volume"
	"github.com/coffer-backup/coffer/internal/media/vtl"
	"github.com/coffer-backup/coffer/internal/policy"
)

// MediaLibraryInput names the tape library and the drive an operation
// uses.
type MediaLibraryInput struct {
	// Library is the name of a library of the configuration
	// (media-libraries). The command line may also give a virtual tape
	// library's directory, or "mtx:CHANGER:DEVICE" for a real changer
	// (/dev/sgN, driven through mtx) and drive (/dev/nstN).
	Library string
	// Drive is the changer's number of the drive (mtx's data transfer
	// element); 0 is also the first drive of a real library whose
	// drives start at another number.
	Drive int
	// Configured accepts only a library of the configuration: the API's
	// callers name libraries, never paths of the server's host.
	Configured bool
}

// mediaLibrary is a library an operation found (internal/media/all
// opens it), with what the service adds: its access-control path and its
// drives' slots.
type mediaLibrary struct{ mediaall.Library }

// object is the library's access-control path (tasks on it are seen with
// Repo.Audit there); a path the command line named is below /media.
func (l mediaLibrary) object() string {
	if l.Name != "" {
		return auth.MediaLibraryPath(l.Name)
	}
	return auth.MediaPath
}

// resolveLibrary resolves a library: a name of the configuration in
// effect first; then, unless only configured libraries are accepted, a
// directory or mtx:CHANGER:DEVICE.
func (s Ops) resolveLibrary(ctx context.Context, in MediaLibraryInput) (mediaLibrary, error) {
	if in.Library == "" {
		return mediaLibrary{}, service.Invalidf("no media library given (--library: a library of the configuration, or a VTL directory)")
	}
	st, err := s.ReadConfig(ctx)
	if err == nil {
		if l, ok := st.Engine.MediaLibrary(in.Library); ok {
			if err := l.Validate(); err != nil {
				return mediaLibrary{}, service.Invalidf("%s: %v", service.ConfigWhere(st), err)
			}
			if l.Kind == policy.MediaMtx {
				devices, drive := l.DriveDevices(), in.Drive
				if _, ok := devices[0]; !ok && drive == 0 {
					// The first drive by default (the API's requests name
					// none), whichever number the changer gives it.
					drive = slices.Min(slices.Collect(maps.Keys(devices)))
				}
				return mediaLibrary{mediaall.Library{Name: l.Name, Changer: l.Changer, Devices: devices, Drive: drive, DriveLimit: l.DriveLimit}}, nil
			}
			dir := config.ExpandHome(l.Directory)
			return mediaLibrary{mediaall.Library{Name: l.Name, Dir: dir, Drive: in.Drive, DriveLimit: l.DriveLimit}}, nil
		}
	}
	pathLike := strings.HasPrefix(in.Library, "mtx:") || strings.ContainsRune(in.Library, filepath.Separator)
	switch {
	case in.Configured && err != nil:
		return mediaLibrary{}, err
	case in.Configured:
		return mediaLibrary{}, api.Errorf(api.NotFound, "no media library %q in the configuration (`coffer config list media-libraries` lists them; "+
			"create one with `coffer config create media-library`)", in.Library)
	case err != nil && !pathLike:
		return mediaLibrary{}, err
	}
	if rest, ok := strings.CutPrefix(in.Library, "mtx:"); ok {
		changer, device, ok := strings.Cut(rest, ":")
		if !ok || changer == "" || device == "" {
			return mediaLibrary{}, service.Invalidf("library %q: write mtx:CHANGER:DEVICE, like mtx:/dev/sg1:/dev/nst0", in.Library)
		}
		return mediaLibrary{mediaall.Library{Changer: changer, Devices: map[int]string{in.Drive: device}, Drive: in.Drive}}, nil
	}
	return mediaLibrary{mediaall.Library{Dir: in.Library, Drive: in.Drive}}, nil
}

// Rows of the media catalogue from a volume's index, and back.

func volumeRow(ix format.VolumeIndex, library string) catalog.MediaVolume {
	return catalog.MediaVolume{Barcode: ix.Label.Barcode, Library: library, Pool: ix.Label.Pool, MediaSet: ix.Label.MediaSet,
		BlockSize: ix.Label.BlockSize, Labelled: ix.Label.Labelled, Written: ix.Written, ProtectedUntil: ix.ProtectedUntil, Full: ix.Full}
}

func segmentRows(ix format.VolumeIndex) []catalog.MediaSegment {
	out := make([]catalog.MediaSegment, 0, len(ix.Segments))
	for _, s := range ix.Segments {
		r := catalog.MediaSegment{Barcode: ix.Label.Barcode, Session: s.Session.String(), Stream: int64(s.Stream), Point: s.Point,
			VM: s.VM, Repository: s.Repository, PointTime: s.Time, FirstSeq: int64(s.FirstSeq), LastSeq: int64(s.LastSeq),
			Bytes: s.Bytes, End: s.End}
		for _, e := range s.Extents {
			r.Extents = append(r.Extents, catalog.MediaExtent{Pos: e.Pos, Count: e.Count})
		}
		out = append(out, r)
	}
	return out
}

func placedFromRow(r catalog.MediaSegment) (volume.Placed, error) {
	var sid format.SessionID
	if err := sid.UnmarshalText([]byte(r.Session)); err != nil {
		return volume.Placed{}, fmt.Errorf("media catalogue: %w", err)
	}
	s := format.Segment{StreamInfo: format.StreamInfo{Stream: uint32(r.Stream), Point: r.Point, VM: r.VM, Repository: r.Repository, Time: r.PointTime},
		Session: sid, FirstSeq: uint64(r.FirstSeq), LastSeq: uint64(r.LastSeq), Bytes: r.Bytes, End: r.End}
	for _, e := range r.Extents {
		s.Extents = append(s.Extents, format.Extent{Pos: e.Pos, Count: e.Count})
	}
	if err := s.Validate(); err != nil {
		return volume.Placed{}, fmt.Errorf("media catalogue, volume %s: %w", r.Barcode, err)
	}
	return volume.Placed{Barcode: r.Barcode, Segment: s}, nil
}

func volumeDoc(v catalog.MediaVolume) api.MediaVolume {
	return api.MediaVolume{Barcode: v.Barcode, Library: v.Library, Pool: v.Pool, MediaSet: v.MediaSet, BlockSizeBytes: v.BlockSize,
		Labelled: v.Labelled, Written: v.Written, ProtectedUntil: v.ProtectedUntil, Full: v.Full, WORM: v.WORM, Segments: v.Segments}
}

// cartridgeWORM says whether a cartridge is WORM: a VTL knows each of its
// cartridges; a real library's drive reports it of the cartridge it holds
// (st's status), so the catalogue keeps what it saw once (recordVolumes).
func cartridgeWORM(lib *volume.Library, barcode string) bool {
	if v, ok := lib.Changer.(*vtl.Library); ok {
		info, _ := v.Cartridge(barcode)
		return info.WORM
	}
	st, err := lib.Changer.Status()
	if err != nil {
		return false
	}
	if d, _, ok := st.FindVolume(barcode); ok && d == lib.DriveIndex {
		ds, err := lib.Drive.Status()
		return err == nil && ds.WORM
	}
	return false
}

func segmentDoc(s catalog.MediaSegment) api.MediaSegment {
	d := api.MediaSegment{Barcode: s.Barcode, PointID: s.Point, VM: s.VM, Repository: s.Repository, Session: s.Session, Stream: s.Stream,
		FirstBlock: s.FirstSeq, LastBlock: s.LastSeq, DataBytes: s.Bytes, End: s.End, Extents: []api.MediaExtent{}}
	for _, e := range s.Extents {
		d.Extents = append(d.Extents, api.MediaExtent{Position: e.Pos, Count: e.Count})
	}
	return d
}

// closeLibrary closes a library an operation opened: its drives and
// changer are released whatever the outcome, and a failure to release them
// is a warning, the operation's own result being decided.
func (s Ops) closeLibrary(closeLib func() error) { s.warnClose("the media library", closeLib) }

// warnClose closes what an operation opened and warns when that fails.
func (s Ops) warnClose(what string, close func() error) {
	if err := close(); err != nil {
		s.Logger().Warn("closing "+what, "err", err)
	}
}
