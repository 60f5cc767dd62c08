package mediaops

import (
	"github.com/coffer-backup/coffer/internal/service"

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

// MediaHere is what the command line on a library's host may name for a
// media operation and the API's callers may not. It is kept out of the
// operations' inputs, which are the API's: the methods take it beside
// them, the command line fills it in when it runs an operation in this
// process, and the server runs them with the zero MediaHere (served).
type MediaHere struct {
	// Local accepts a virtual tape library's directory or
	// mtx:CHANGER:DEVICE as the library besides one of the configuration,
	// and a target (--to) anywhere on this host rather than under the
	// server's restore directory.
	Local bool
	// Drive is the changer's number of the drive of an operation whose
	// input names none (through the API: the library's first).
	Drive int
	// StageDir receives a point read back from tape (restores, file
	// extraction), SpoolDir points while they are written (copies); "":
	// the temporary directory.
	StageDir, SpoolDir string
}

// served binds a media operation's method to its endpoint: the API's
// callers name a library of the configuration, its first drive unless
// the input names one, and no directory of the server's host.
func served[I, T any](m func(Ops, context.Context, *I, MediaHere) (T, error)) func(Ops, context.Context, *I) (T, error) {
	return func(s Ops, ctx context.Context, in *I) (T, error) { return m(s, ctx, in, MediaHere{}) }
}

// library is the library a media operation works on, on drive.
func (h MediaHere) library(name string, drive int) MediaLibraryInput {
	return MediaLibraryInput{Library: name, Drive: drive, Configured: !h.Local}
}

// target is where a media operation writes what it reads from tape: a
// path of this host as the command line gave it, or one under the
// server's restore directory.
func (h MediaHere) target(s Ops, to string) (string, error) {
	if h.Local {
		return to, nil
	}
	return service.Confine(s.Config.Files.RestoreDir, service.RestoreDir, to)
}

// MediaVolumes lists the volumes of the media catalogue (of one pool, of
// one library) that the caller may see: Repo.Audit on /media/{library}.
func (s Ops) MediaVolumes(ctx context.Context, in *api.ListMediaVolumesInput) ([]api.MediaVolume, error) {
	vols, err := s.mediaVolumes(ctx, in.Pool)
	if err != nil {
		return nil, err
	}
	var out []api.MediaVolume
	for _, v := range vols {
		if in.Library == "" || v.Library == in.Library {
			out = append(out, v)
		}
	}
	return service.Visible(ctx, s.Service, auth.RepoAudit, out, func(v api.MediaVolume) []string {
		return []string{auth.MediaLibraryPath(v.Library)}
	}), nil
}

// MediaContents lists the segments of the media catalogue (of a volume,
// of a point: an ID or a unique prefix) on the volumes of the libraries
// the caller may see.
func (s Ops) MediaContents(ctx context.Context, in *api.MediaContentsInput) ([]api.MediaSegment, error) {
	segs, err := s.mediaContents(ctx, in.Barcode, in.Point)
	if err != nil {
		return nil, err
	}
	vols, err := s.mediaVolumes(ctx, "")
	if err != nil {
		return nil, err
	}
	library := map[string]string{}
	for _, v := range vols {
		library[v.Barcode] = v.Library
	}
	return service.Visible(ctx, s.Service, auth.RepoAudit, segs, func(sg api.MediaSegment) []string {
		return []string{auth.MediaLibraryPath(library[sg.Barcode])}
	}), nil
}
