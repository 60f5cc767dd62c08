package service

import (
	"context"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
)

// The endpoints of sequential media. A request names a library of the
// configuration (media-libraries), never a directory or a device of the
// server's host (MediaLibraryInput.Configured); what a restore writes
// goes under the server's restore directory, as the repository's
// restores do. A library is a store of backup points' copies, so its
// privileges are the repositories' (on /media/{library}): Repo.Audit to
// see it, Repo.Backup to write points onto it, Repo.Read to read them
// out, Repo.Verify to verify it, Repo.Modify to label cartridges and
// rebuild its catalogue.

// onLibrary is the ACL path of the library a request names.
const onLibrary = auth.MediaPath + "/{library}"

// LibraryParam is the media library a request names.
type LibraryParam struct {
	Library string `path:"library" minLength:"1" maxLength:"255" example:"vtl1" doc:"a media library of the server's configuration"`
}

// in is the library as the service's operations take it: configured
// libraries only, the first drive.
func (p LibraryParam) in() MediaLibraryInput {
	return MediaLibraryInput{Library: p.Library, Configured: true}
}

func epMediaLibraryStatus(ctx context.Context, s *Service, in *LibraryParam) (*Result[*api.MediaLibraryStatus], error) {
	return result(s.MediaLibraryStatus(ctx, in.in()))
}

// DriveParam is a drive of the library a request names.
type DriveParam struct {
	LibraryParam
	Drive int `path:"drive" minimum:"0" maximum:"1024" doc:"the changer's number of the drive (mtx's data transfer element)"`
}

func (p DriveParam) in() MediaLibraryInput {
	in := p.LibraryParam.in()
	in.Drive = p.Drive
	return in
}

type mediaLoadIn struct {
	DriveParam
	Body api.MediaLoadRequest
}

func epMediaLoad(ctx context.Context, s *Service, in *mediaLoadIn) (*Result[*api.MediaLibraryStatus], error) {
	return result(s.MediaLoad(ctx, in.DriveParam.in(), in.Body.Barcode))
}

func epMediaUnload(ctx context.Context, s *Service, in *DriveParam) (*Result[*api.MediaLibraryStatus], error) {
	return result(s.MediaUnload(ctx, in.in()))
}

type mediaLabelIn struct {
	LibraryParam
	Body api.MediaLabelRequest
}

func epMediaLabel(ctx context.Context, s *Service, in *mediaLabelIn) (*Result[*api.MediaVolume], error) {
	b := in.Body
	return result(s.MediaLabel(ctx, MediaLabelInput{MediaLibraryInput: in.in(), Barcode: b.Barcode, Pool: b.Pool,
		BlockSize: b.BlockSizeBytes, Foreign: b.Foreign}))
}

type mediaCopyIn struct {
	RepoParam
	Library string `query:"library" required:"true" minLength:"1" maxLength:"255" doc:"the media library of the server's configuration to write to"`
	Body    api.MediaCopyRequest
}

// epMediaCopy copies points of the request's repository to a pool of the
// library; points are spooled in the server's temporary directory.
func epMediaCopy(ctx context.Context, s *Service, in *mediaCopyIn) (*Result[*api.MediaCopyResult], error) {
	b := in.Body
	return result(s.MediaCopy(ctx, MediaCopyInput{MediaLibraryInput: LibraryParam{in.Library}.in(), Pool: b.Pool, Points: b.Points,
		VM: b.VM, Latest: b.Latest, Multiplex: b.Multiplex, MaxMultiplex: b.MaxMultiplex, Drives: b.Drives, RunBlocks: b.RunBlocks,
		BlockSize: b.BlockSizeBytes, Retention: fromSeconds(b.RetentionSeconds)}))
}

// MediaPointParam is a backup point on a library's volumes.
type MediaPointParam struct {
	LibraryParam
	Point string `path:"point" minLength:"1" maxLength:"64" doc:"a backup point in the media catalogue: its ID or a unique ID prefix"`
}

type mediaRestoreIn struct {
	MediaPointParam
	Body api.MediaRestoreRequest
}

// epMediaRestore restores a point's disks from the library, staged in
// the server's temporary directory, opened with the password of the
// server's repository setting.
func epMediaRestore(ctx context.Context, s *Service, in *mediaRestoreIn) (*Result[*api.MediaRestoreResult], error) {
	to, err := confine(s.cfg.Files.RestoreDir, restoreDir, in.Body.To)
	if err != nil {
		return nil, err
	}
	b := in.Body
	return result(s.MediaRestore(ctx, MediaRestoreInput{MediaLibraryInput: in.in(), Point: in.Point, Disk: b.Disk, To: to,
		Overwrite: b.Overwrite, ReadThrough: b.ReadThroughBlocks}))
}

type mediaFilesIn struct {
	MediaPointParam
	Disk string `query:"disk" maxLength:"255" doc:"the disk: index, key or name (default: the first)"`
	Body api.FilesExtractRequest
}

func epMediaFilesExtract(ctx context.Context, s *Service, in *mediaFilesIn) (*Result[*api.FilesExtract], error) {
	for _, p := range in.Body.Paths {
		if err := insidePath(p); err != nil {
			return nil, err
		}
	}
	to, err := confine(s.cfg.Files.RestoreDir, restoreDir, in.Body.To)
	if err != nil {
		return nil, err
	}
	ref := in.Point
	if in.Disk != "" {
		ref += ":" + in.Disk
	}
	return result(s.MediaFilesExtract(ctx, MediaFilesInput{MediaLibraryInput: in.in(), Ref: ref, Paths: in.Body.Paths, To: to}))
}

type mediaVerifyIn struct {
	LibraryParam
	Barcode string `path:"barcode" minLength:"1" maxLength:"16" doc:"the volume's barcode"`
}

func epMediaVerify(ctx context.Context, s *Service, in *mediaVerifyIn) (*Result[*api.MediaVerifyReport], error) {
	return result(s.MediaVerify(ctx, in.in(), in.Barcode))
}

type mediaCatalogIn struct {
	LibraryParam
	Body api.MediaCatalogRequest
}

func epMediaCatalog(ctx context.Context, s *Service, in *mediaCatalogIn) (*Result[*api.MediaCatalogResult], error) {
	return result(s.MediaCatalog(ctx, MediaCatalogInput{MediaLibraryInput: in.in(), Scan: in.Body.Scan}))
}

type mediaVolumesIn struct {
	Pool    string `query:"pool" maxLength:"255" doc:"only this pool's volumes"`
	Library string `query:"library" maxLength:"255" doc:"only the volumes last seen in this library"`
}

// epMediaVolumes lists the volumes of the libraries the caller may see
// (Repo.Audit on /media/{library}).
func epMediaVolumes(ctx context.Context, s *Service, in *mediaVolumesIn) (*Result[[]api.MediaVolume], error) {
	vols, err := s.MediaVolumes(ctx, in.Pool)
	if err != nil {
		return nil, err
	}
	var out []api.MediaVolume
	for _, v := range vols {
		if in.Library == "" || v.Library == in.Library {
			out = append(out, v)
		}
	}
	return result(visible(ctx, s, auth.RepoAudit, out, func(v api.MediaVolume) []string {
		return []string{auth.MediaLibraryPath(v.Library)}
	}), nil)
}

type mediaContentsIn struct {
	Barcode string `query:"barcode" maxLength:"16" doc:"only this volume's segments"`
	Point   string `query:"point" maxLength:"64" doc:"only this backup point's segments: its ID or a unique ID prefix"`
}

// epMediaContents lists the segments on the volumes of the libraries the
// caller may see.
func epMediaContents(ctx context.Context, s *Service, in *mediaContentsIn) (*Result[[]api.MediaSegment], error) {
	segs, err := s.MediaContents(ctx, in.Barcode, in.Point)
	if err != nil {
		return nil, err
	}
	vols, err := s.MediaVolumes(ctx, "")
	if err != nil {
		return nil, err
	}
	library := map[string]string{}
	for _, v := range vols {
		library[v.Barcode] = v.Library
	}
	return result(visible(ctx, s, auth.RepoAudit, segs, func(sg api.MediaSegment) []string {
		return []string{auth.MediaLibraryPath(library[sg.Barcode])}
	}), nil)
}
