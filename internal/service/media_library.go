package service

import (
	"fmt"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/media/format"
	"github.com/coffer-backup/coffer/internal/media/st"
	"github.com/coffer-backup/coffer/internal/media/volume"
	"github.com/coffer-backup/coffer/internal/media/vtl"
)

// MediaLibraryInput names the tape library and the drive an operation
// uses.
type MediaLibraryInput struct {
	// Library is a virtual tape library's directory, or
	// "mtx:CHANGER:DEVICE" for a real changer (/dev/sgN, driven through
	// mtx) and drive (/dev/nstN).
	Library string
	// Drive is the changer's number of the drive (mtx's data transfer
	// element).
	Drive int
}

// openLibrary opens a library; close releases it (the VTL's lock).
func openLibrary(in MediaLibraryInput) (lib *volume.Library, close func() error, err error) {
	if in.Library == "" {
		return nil, nil, invalidf("no media library given (--library)")
	}
	if rest, ok := strings.CutPrefix(in.Library, "mtx:"); ok {
		changer, device, ok := strings.Cut(rest, ":")
		if !ok || changer == "" || device == "" {
			return nil, nil, invalidf("library %q: write mtx:CHANGER:DEVICE, like mtx:/dev/sg1:/dev/nst0", in.Library)
		}
		d := st.Open(device)
		l := &st.Library{Changer: &st.Changer{Device: changer}, Drives: map[int]*st.Drive{in.Drive: d}}
		return &volume.Library{Changer: l, Drive: d, DriveIndex: in.Drive}, d.Close, nil
	}
	v, err := vtl.Open(in.Library)
	if err != nil {
		return nil, nil, err
	}
	d, err := v.Drive(in.Drive)
	if err != nil {
		v.Close()
		return nil, nil, invalidf("%v", err)
	}
	return &volume.Library{Changer: v, Drive: d, DriveIndex: in.Drive}, v.Close, nil
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
		Labelled: v.Labelled, Written: v.Written, ProtectedUntil: v.ProtectedUntil, Full: v.Full, Segments: v.Segments}
}

func segmentDoc(s catalog.MediaSegment) api.MediaSegment {
	d := api.MediaSegment{Barcode: s.Barcode, PointID: s.Point, VM: s.VM, Repository: s.Repository, Session: s.Session, Stream: s.Stream,
		FirstBlock: s.FirstSeq, LastBlock: s.LastSeq, DataBytes: s.Bytes, End: s.End, Extents: []api.MediaExtent{}}
	for _, e := range s.Extents {
		d.Extents = append(d.Extents, api.MediaExtent{Position: e.Pos, Count: e.Count})
	}
	return d
}
