package mediaops

import (
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/apidoc"

	"context"
	"fmt"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/files"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
)

// MediaFilesExtract extracts files or trees from inside a backed-up disk
// of a point on tape, without its repository: the point is staged from
// the media as for MediaRestore, and the file readers of `coffer files
// get` read the disk from the staged repository. The point is an ID or a
// unique prefix in the media catalogue.
func (s Ops) MediaFilesExtract(ctx context.Context, call *api.MediaFilesExtractInput, here MediaHere) (*api.FilesExtract, error) {
	return s.mediaFilesExtract(ctx, call, here, nil)
}

func (s Ops) mediaFilesExtract(ctx context.Context, call *api.MediaFilesExtractInput, here MediaHere, handed mediaBook) (*api.FilesExtract, error) {
	at, err := s.locate(ctx, here.library(call.Library, here.Drive), handed)
	if err != nil {
		return nil, err
	}
	in, err := mediaFilesTarget(s, call, here, at.worker != "")
	if err != nil {
		return nil, err
	}
	if in.To == "" {
		return nil, service.Invalidf("no target directory given")
	}
	if len(in.Paths) == 0 {
		return nil, service.Invalidf("no path given")
	}
	pointRef, diskSel := call.Point, call.Disk
	ref := pointRef
	if diskSel != "" {
		ref += ":" + diskSel
	}
	spec := service.JobSpec{Kind: job.KindMediaRestore, Object: at.ml.object(), Detail: ref + " from library " + at.ml.Ref()}
	return service.Run(ctx, s.Service, spec, func(ctx context.Context, t service.Job) (*api.FilesExtract, error) {
		if at.worker != "" {
			return handOffJob[*api.FilesExtract](ctx, s, t, at, "media-files-extract", call, "", pointRef)
		}
		staged, done, err := s.stageFromMedia(ctx, at, pointRef, here.StageDir, 0)
		if err != nil {
			return nil, err
		}
		defer done()
		disk, err := oneDisk(staged.Point, diskSel)
		if err != nil {
			return nil, err
		}
		dr, err := restore.OpenDisk(ctx, staged.Repo, disk, restore.CacheChunks(service.FileCacheBytes, disk.ChunkSize))
		if err != nil {
			return nil, err
		}
		d, err := files.Open(dr, dr.Size())
		if err != nil {
			return nil, err
		}
		fsys, err := d.Root()
		if err != nil {
			return nil, err
		}
		st, err := files.Extract(ctx, fsys, in.Paths, in.To)
		if err != nil {
			return nil, err
		}
		out := &api.FilesExtract{Files: st.Files, Dirs: st.Dirs, Links: st.Links, ExtractedBytes: st.Bytes,
			Skipped: apidoc.SkipDocs(st.Skipped), Warnings: apidoc.WarningDocs(d)}
		return out, apidoc.SkippedError(out.Skipped, "extracted")
	})
}

// oneDisk is the disk a selector names, the first when it names none.
func oneDisk(snap *repo.Point, sel string) (repo.Disk, error) {
	if sel == "" {
		if len(snap.Disks) == 0 {
			return repo.Disk{}, fmt.Errorf("backup point %s has no disks", snap.ID.Short())
		}
		return snap.Disks[0], nil
	}
	ds, err := service.PickDisks(snap, sel)
	if err != nil {
		return repo.Disk{}, err
	}
	return ds[0], nil
}

// mediaFilesTarget is a file extraction's request with its target
// resolved (MediaHere.target); through the API, the paths inside the disk
// are checked first, as the repository's file extraction does.
// A target on a worker is the worker's to resolve (elsewhere).
func mediaFilesTarget(s Ops, call *api.MediaFilesExtractInput, here MediaHere, elsewhere bool) (api.FilesExtractRequest, error) {
	in := call.Body
	if !here.Local {
		for _, p := range in.Paths {
			if err := service.InsidePath(p); err != nil {
				return in, err
			}
		}
	}
	if elsewhere {
		return in, nil
	}
	to, err := here.target(s, in.To)
	in.To = to
	return in, err
}
